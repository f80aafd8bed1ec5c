/**
 * The CLI's help texts: the overview `fusion help` prints (every flag the README lists), and one
 * text per command, printed by `fusion COMMAND --help` (which then starts nothing). Each
 * command's option list, the environment list and the exit codes are generated from the options
 * table (config/options.ts) and the exit code table (exit-codes.ts). Light on purpose: `fusion
 * help` loads nothing else.
 */
import { COMMANDS, OPTIONS, flagSynopsis, helpOptionsOf, optionsOf, type Command } from '../config/options.js';
import { EXIT_CODES } from './exit-codes.js';

export const FETCH_USAGE =
  '  fusion fetch URL [--extract text|markdown] [--json] [--resolve HOST:IP]… [--allow-cidr CIDR]…\n' +
  '                     one guarded fetch (exit 0 ok, 3 refused by policy, 4 other fetch failure)\n';

export const SEARCH_USAGE =
  '  fusion search QUERY… [--count N] [--json] [--resolve HOST:IP]… [--allow-cidr CIDR]…\n' +
  '                     one web search through FUSION_SEARCH_PROVIDER (results only; nothing is fetched)\n';

export const MODELS_HELP = `fusion models — model roster tools

Usage:
  fusion models check [--models-file FILE] [--candidate-model SPEC…] [--evaluator-model SPEC]
                      [--merger-model SPEC] [--timeout SECONDS] [--json]

SPEC is PROVIDER:MODEL[@BASE_URL]: openai:gpt-4.1, openai:qwen3@http://127.0.0.1:11434/v1,
anthropic:claude-sonnet-4-5, builtin:content-search. --candidate-model takes one model
(self-fusion) or three. Keys come from OPENAI_API_KEY / ANTHROPIC_API_KEY or the models file
(apiKeyEnv, apiKeyFile with mode 0600). The models file defaults to $FUSION_MODELS_FILE.
`;

export const SANDBOX_HELP = `Usage: fusion sandbox exec [--backend auto|bwrap|docker|gvisor] [--repo DIR] [--out DIR] [--sandbox-uids START-END] -- CMD ARGS…

Runs CMD under exactly the candidate sandbox policy (no broker): DIR (default: the current
directory) read-only at /repo, --out DIR (default: a temporary directory, removed afterwards)
writable at /out, the built child code at /opt/fusion, no network. Exits with CMD's exit code
(128+N when killed by signal N, 124 on timeout, 125 over the output cap, 130 when interrupted).
As root, CMD runs as a uid of its own from --sandbox-uids (default 2100000000-2100065535).
`;

export const KEYS_USAGE = `  fusion keys create --workspace W --kind workspace|personal|copilot [--data DIR] [--research-db FILE]
                                     [--database-url postgres://…]  (cluster mode: the shared database)
                                     prints a new research API key once (stdout); only its sha256 is stored
  fusion keys list [--json]          fusion keys revoke ID
`;

const MODEL_FLAGS = '[--models-file F] [--candidate-model S…] [--evaluator-model S] [--merger-model S]';

const DAEMON_USAGE = `  fusion daemon [--socket PATH] [--data DIR] [--sandbox auto|bwrap|docker|gvisor] [--sandbox-uids START-END] [--log-level L] [--concurrency N]
                [--socket-group GROUP]   socket 0660 for GROUP: its members submit and see their own tasks
                [--max-queued N] [--max-queued-per-caller N] [--storage-reserve-mb N] [--keep-attempt-files]
                [--sandbox-rlimit-fallback]
                ${MODEL_FLAGS}
                [--resolve HOST:IP…] [--allow-cidr CIDR…]
                [--listen HOST:PORT [--listen-public]]   research API over TCP (loopback unless --listen-public)
                [--dashboard HOST:PORT]                  read-only web dashboard (loopback: callers by local uid)
                [--research-store sqlite|memory] [--research-db FILE] [--research-user-agent UA]
                [--research-queue-prefix bull|cluster|PREFIX]   Redis prefix of the research-runs queue (default bull)
                [--database-url postgres://…]            cluster mode: state and artefacts in PostgreSQL
`;

const SUBMIT_USAGE = `  fusion investigate (--objective T --background T… --deliverable T [--scope T…] [--constraint T…] | --input FILE|-)
                     [--repo DIR] [--sandbox B] [--candidate-model S…] [--evaluator-model S] [--merger-model S]
                     [--wait] [--json]
  fusion research    (the same flags, plus sources: --source URL --purpose TEXT…, or --source URL=PURPOSE…)
                     [--from-search QUERY [--search-count N] [--yes]]   search results as sources, only with --yes
                     [--wait] [--json]
`;

const SOURCES_HELP = `Sources (research, 1 or more): give each URL with its purpose, in pairs:
  --source https://example.com/a?x=1 --purpose "What the page is for"
or as one value URL=PURPOSE, split at the first "=" only when that cannot misread the URL: a value
whose "=" may belong to the URL's query string (or whose purpose looks like the rest of a URL) is
refused as ambiguous. Both forms may be mixed; a --purpose belongs to the --source just before it.
`;

function wrap(words: readonly string[], width = 96, indent = '  '): string {
  const lines: string[] = [];
  let line = indent;
  for (const w of words) {
    if (line.length + w.length + 1 > width && line.trim() !== '') {
      lines.push(line.trimEnd());
      line = indent;
    }
    line += `${w} `;
  }
  if (line.trim() !== '') lines.push(line.trimEnd());
  return `${lines.join('\n')}\n`;
}

const ENVIRONMENT = `Environment (flag > variable > default; 'fusion help COMMAND' says which command reads which):\n${wrap(
  [...new Map(OPTIONS.flatMap((o) => (o.env === undefined ? [] : [[o.env, o.flag === undefined ? o.env : `${o.env} (--${o.flag})`] as const])).reverse()).values()].reverse().map((w, i, all) => (i < all.length - 1 ? `${w},` : w)),
)}`;

const EXIT_TEXT = EXIT_CODES.map((e) => `  ${String(e.code).padStart(3)}  ${e.meaning.replace(/`/gu, "'")}`).join('\n');

export const HELP = `fusion — run Fusion jobs (three sandboxed candidates, a blind evaluator, a merger) with a sealed audit

Usage:
${DAEMON_USAGE}${SUBMIT_USAGE}  fusion status ID [--json]          fusion tasks [--state S] [--limit N] [--watch] [--json]
  fusion logs ID [--follow] [--json]
  fusion result ID [--delivery auto|inline|artifact] [--json]
  fusion wait ID [--timeout SECONDS] [--json]
  fusion cancel ID [--json]
  fusion validate fusion_investigate|fusion_research [FILE|-]
  fusion models check ${MODEL_FLAGS} [--timeout SECONDS] [--json]
  fusion sandbox exec [--backend auto|bwrap|docker|gvisor] [--repo DIR] [--out DIR] [--sandbox-uids START-END] -- CMD ARGS…
                                     run CMD under exactly the candidate policy (no broker); exits with its code
${FETCH_USAGE}${SEARCH_USAGE}${KEYS_USAGE}  fusion mcp [--repo DIR] [--root DIR…] [--socket PATH] [--resolve HOST:IP…] [--allow-cidr CIDR…]
                                     MCP server on stdio (task, research-run and web tools; see README)
  fusion keys signing-init|signing-public [--data DIR]   Ed25519 key that signs task tarballs
  fusion audit export TASK -o FILE.tar [--data DIR] [--database-url postgres://…]
                                     the task's sealed tarball, from the database (cluster mode: the shared one)
  fusion audit verify TASK|FILE.tar [--file|--id] [--max-bytes N] [--pubkey FILE] [--replay [--repo DIR]] [--database-url postgres://…] [--json]
                                     offline; exit 1 names the first broken member
  fusion help [COMMAND]              this overview, or one command's help (also: fusion COMMAND --help)
  fusion completion bash|zsh         shell completion script
  fusion --version                   the version

Every command that talks to a daemon takes --socket PATH and --data DIR (where to find it); these and
--json may also come before the command (fusion --data DIR tasks).
Model specs: PROVIDER:MODEL[@BASE_URL], e.g. openai:qwen3@http://127.0.0.1:11434/v1,
anthropic:claude-sonnet-4-5, builtin:content-search. Keys: OPENAI_API_KEY / ANTHROPIC_API_KEY.
${ENVIRONMENT}Input is validated before any daemon is contacted.
Exit codes:
${EXIT_TEXT}
`;

const CONNECT = 'Connects to the daemon on --socket PATH (default $FUSION_SOCKET, else the socket recorded by the daemon owning $FUSION_HOME, else $FUSION_HOME/fusion.sock; --data DIR sets FUSION_HOME).\n';

const BASE_HELP: Readonly<Record<Command, string>> = {
  daemon: `Usage:
${DAEMON_USAGE}
Runs the supervisor daemon in the foreground until SIGTERM/SIGINT. The stop takes at most
FUSION_SHUTDOWN_TIMEOUT_S (default 30) seconds: past it the daemon exits 1, logging the runs it
abandoned (they resume later); a second signal exits at once. --resolve and --allow-cidr
are the egress admin seams (announced at start-up). --listen serves the research API (and only it)
over TCP; a non-loopback address also needs --listen-public (keys would cross the network in clear). Models come from --models-file (or
FUSION_MODELS_FILE) and the model flags; with none, every stage uses the builtin engine.
`,
  investigate: `Usage:
${SUBMIT_USAGE}
Submits a job over the repository (--repo, default the current directory) and prints the
receipt; with --wait, follows it and prints the verified answer (starting an embedded daemon
when none answers). The arguments are validated before any daemon is contacted (exit 2).
With --wait, a completed task that could read none of the repository's files exits 66.
`,
  research: `Usage:
${SUBMIT_USAGE}
${SOURCES_HELP}
--from-search QUERY runs one web search (fusion search) and lists its results; only with --yes do
the fetchable ones become sources (purpose: the result's rank, query and title). Without --yes
nothing is submitted (exit 2).
The arguments, sources included, are validated before any daemon is contacted (exit 2).
With --wait, a completed task none of whose sources could be fetched (DNS, refused by policy,
robots.txt…) exits 66: its answer verifies but is written without them (see "Sources not read").
`,
  status: `Usage: fusion status ID [--json]\n\nPrints the task's state, error and usage so far.\n${CONNECT}`,
  tasks: `Usage: fusion tasks [--state S] [--limit N] [--watch] [--json]\n\nLists tasks, newest first (at most N, 1–1000, default 100), as a table: id, state, age, duration, objective, caller.\n--watch redraws it as tasks change; --json prints the daemon's reply.\n${CONNECT}`,
  logs: `Usage: fusion logs ID [--follow] [--json]\n\nPrints a task's events: state changes, each candidate attempt and its tool calls, the end.\n--follow keeps printing until the task ends (a heartbeat every FUSION_PROGRESS_HEARTBEAT_S seconds, default 15);\n--json prints the events as NDJSON.\n${CONNECT}`,
  result: `Usage: fusion result ID [--delivery auto|inline|artifact] [--json]\n\nPrints the verified answer (header on stderr, text on stdout); never blocks, never truncates.\nExit 0 with an answer, 1 when the task ended without one, 75 while it is still running,\n66 when the answer verifies but the task read nothing (none of its declared sources, or none of the\nrepository's files: "nothingRead": true in the JSON form; the answer's last section says why).\nThe JSON form carries "citations": the check of every quote in the answer.\n${CONNECT}`,
  wait: `Usage: fusion wait ID [--timeout SECONDS] [--json]\n\nWaits (--timeout, default 600 s, at most 86400 s; 0 reports the state at once) for the task to end; exit 0 when it completed, 1 when it failed or was\ncancelled, 66 when it completed but read nothing (none of its declared sources or repository files;\n"nothingRead": true in the JSON form), 124 (and "timed out" on stderr) when the timeout expired first.\n${CONNECT}`,
  cancel: `Usage: fusion cancel ID [--json]\n\nCancels a running task and waits until its sandboxes are gone; prints the task with its usage.\n${CONNECT}`,
  validate: 'Usage: fusion validate fusion_investigate|fusion_research [FILE|-] [--json]\n\nPrints the normalised arguments as JSON (exit 0) or the exact validation message (exit 2). Creates nothing.\n',
  models: MODELS_HELP,
  sandbox: SANDBOX_HELP,
  fetch: `Usage:\n${FETCH_USAGE}`,
  search: `Usage:\n${SEARCH_USAGE}\nProvider settings (environment): FUSION_SEARCH_PROVIDER searxng|brave, FUSION_SEARCH_URL (base URL;\nbrave defaults to https://api.search.brave.com), FUSION_SEARCH_ALLOW_HOSTS (hosts search may reach; the URL's\nhost must be listed; brave defaults to api.search.brave.com), FUSION_SEARCH_API_KEY (brave; never logged).\nResults are untrusted and nothing is fetched. Exit 0 ok, 2 usage/configuration, 3 refused by policy, 4 other failure.\n`,
  mcp: 'Usage: fusion mcp [--repo DIR] [--root DIR]… [--socket PATH] [--data DIR] [--resolve HOST:IP]… [--allow-cidr CIDR]…\n\nA Model Context Protocol server on stdio: fusion_investigate, fusion_research, bg_result, bg_status, bg_cancel,\nresearch_run, research_get, research_snapshots, research_list (key from FUSION_RESEARCH_API_KEY), web_read, web_crawl and web_search (through the egress guard, with these seams;\nweb_search asks the provider of FUSION_SEARCH_PROVIDER/_URL/_ALLOW_HOSTS/_API_KEY).\nUses the running daemon or starts an embedded one.\n',
  keys: `Usage:
${KEYS_USAGE}  fusion keys signing-init|signing-public [--data DIR]

create/list/revoke manage the research API's bearer keys (workspace keys may use the API;
personal and copilot keys are refused with 403); the key is printed once and only its sha256 is
stored. signing-init creates the Ed25519 key pair that signs every task tarball (private key 0600 in the
data directory; refuses to replace one, and refuses while a daemon runs on the data directory: stop it
first, start it after). It lists, signed by the new key, the tasks sealed unsigned before it: they stay
readable and verify as unsigned (sealed before the key). signing-public prints the public key (PEM) for auditors.
`,
  audit: `Usage: fusion audit export TASK -o FILE.tar [--data DIR] [--database-url postgres://…]
       fusion audit verify TASK|FILE.tar [--file|--id] [--max-bytes N] [--pubkey FILE] [--replay [--repo DIR]] [--data DIR] [--database-url postgres://…] [--json]

export writes the task's sealed tarball from the database: the data directory's, or in cluster
mode the shared PostgreSQL database (--database-url or FUSION_DATABASE_URL). verify checks a tarball offline (no
daemon): structure, signature (against --pubkey when given), every member digest, every log and
seal, the broker cross-checks and, with --replay, every repository tool call again. Exit 0 when
all hold; exit 1 naming the first broken member.
`,
  help: 'Usage: fusion help [COMMAND]\n\nThe overview, or one command\'s help (the same as fusion COMMAND --help).\n',
  completion: 'Usage: fusion completion bash|zsh\n\nPrints a shell completion script for the commands and their flags.\n',
};

const EXAMPLES: Readonly<Record<Command, readonly string[]>> = {
  daemon: ['fusion daemon', 'fusion daemon --data /srv/fusion --socket-group fusion --concurrency 4', 'sudo fusion daemon --sandbox bwrap --sandbox-uids 2100000000-2100065535'],
  investigate: ['fusion investigate --objective "Where is the retry policy?" --background "HTTP client" --deliverable "file:line list" --wait', 'fusion investigate --input args.json --repo ~/src/app --json'],
  research: ['fusion research --objective "Rate limits" --background "API client" --deliverable "limits table" --source https://example.com/docs --purpose "API docs" --wait'],
  status: ['fusion status investigate-0123456789abcdef0123456789abcdef', 'fusion --data /srv/fusion status ID --json'],
  tasks: ['fusion tasks', 'fusion tasks --state running --limit 20 --json', 'fusion tasks --watch'],
  logs: ['fusion logs ID', 'fusion logs ID --follow', 'fusion logs ID --json'],
  result: ['fusion result ID', 'fusion result ID --json > result.json   # exit 75 while the task still runs'],
  wait: ['fusion wait ID --timeout 60   # exit 124 when it timed out', 'fusion wait ID --json   # exit 66 ("nothingRead": true) when it completed but read nothing'],
  cancel: ['fusion cancel ID'],
  validate: ['echo \'{"objective":"o","background":[],"deliverable":"d"}\' | fusion validate fusion_investigate'],
  models: ['fusion models check', 'fusion models check --candidate-model openai:qwen3@http://127.0.0.1:11434/v1 --json'],
  sandbox: ['fusion sandbox exec -- ls /repo', 'fusion sandbox exec --backend bwrap --repo . -- node -e "console.log(1)"'],
  fetch: ['fusion fetch https://example.com --extract markdown'],
  search: ['fusion search rust async runtime --count 5 --json'],
  mcp: ['fusion mcp --repo ~/src/app'],
  keys: ['fusion keys create --workspace team --kind workspace', 'fusion keys list --json', 'fusion keys signing-init'],
  audit: ['fusion audit export ID -o task.tar', 'fusion audit verify task.tar --pubkey signing.pub --replay --repo ~/src/app'],
  completion: ['fusion completion bash > /etc/bash_completion.d/fusion', 'source <(fusion completion zsh)'],
  help: ['fusion help', 'fusion help daemon'],
};

/** A command's options, from the table: synopsis, meaning, environment variable, default. */
export function optionsHelp(command: Command): string {
  const shown = helpOptionsOf(command);
  const rows = shown.filter((o) => o.flag !== undefined);
  const envOnly = shown.filter((o) => o.flag === undefined);
  const hidden = optionsOf(command).length - shown.length;
  const lines = rows.map((o) => {
    const extra = [o.env !== undefined ? `env ${o.env}` : '', o.default !== undefined ? `default ${o.default}` : ''].filter(Boolean).join('; ');
    return `  ${flagSynopsis(o).padEnd(34)} ${o.help}${extra ? ` (${extra})` : ''}`;
  });
  const env = envOnly.map((o) => `  ${o.env!.padEnd(34)} ${o.help}${o.default !== undefined ? ` (default ${o.default})` : ''}`);
  const more = hidden > 0 ? `\nThe embedded daemon also takes every other daemon setting (${hidden} more; see 'fusion daemon --help').\n` : '';
  return `${lines.length > 0 ? `\nOptions:\n${lines.join('\n')}\n` : ''}${env.length > 0 ? `\nEnvironment:\n${env.join('\n')}\n` : ''}${more}`;
}

export const COMMAND_HELP: Readonly<Record<Command, string>> = Object.fromEntries(
  COMMANDS.map((c) => [c, `${BASE_HELP[c]}${optionsHelp(c)}\nExamples:\n${EXAMPLES[c].map((e) => `  ${e}`).join('\n')}\n`]),
) as Record<Command, string>;

/** `--help` or `-h` anywhere before a bare `--` (after it, the words belong to another program). */
export function wantsHelp(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).some((a) => a === '--help' || a === '-h');
}
