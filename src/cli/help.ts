/**
 * The CLI's help texts: the overview `fusion help` prints (every flag the README lists), and one
 * text per command, printed by `fusion COMMAND --help` (which then starts nothing).
 */
import { FETCH_USAGE } from './fetch-command.js';
import { SEARCH_USAGE } from './search-command.js';
import { MODELS_HELP } from './models-command.js';
import { SANDBOX_HELP } from './sandbox-command.js';
import { KEYS_USAGE } from './keys-command.js';

const MODEL_FLAGS = '[--models-file F] [--candidate-model S…] [--evaluator-model S] [--merger-model S]';

const DAEMON_USAGE = `  fusion daemon [--socket PATH] [--data DIR] [--sandbox auto|bwrap|docker|gvisor] [--sandbox-uids START-END] [--log-level L] [--concurrency N]
                [--socket-group GROUP]   socket 0660 for GROUP: its members submit and see their own tasks
                [--max-queued N] [--max-queued-per-caller N] [--storage-reserve-mb N] [--keep-attempt-files]
                [--sandbox-rlimit-fallback]
                ${MODEL_FLAGS}
                [--resolve HOST:IP…] [--allow-cidr CIDR…]
                [--listen HOST:PORT [--listen-public]]   research API over TCP (loopback unless --listen-public)
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

export const HELP = `fusion — run Fusion jobs (three sandboxed candidates, a blind evaluator, a merger) with a sealed audit

Usage:
${DAEMON_USAGE}${SUBMIT_USAGE}  fusion status ID [--json]          fusion tasks [--state S] [--limit N] [--json]
  fusion result ID [--delivery auto|inline|artifact] [--json]
  fusion wait ID [--timeout SECONDS] [--json]
  fusion cancel ID [--json]
  fusion validate fusion_investigate|fusion_research [FILE|-]
  fusion models check ${MODEL_FLAGS} [--timeout SECONDS] [--json]
  fusion sandbox exec [--backend auto|bwrap|docker|gvisor] [--repo DIR] [--out DIR] [--sandbox-uids START-END] -- CMD ARGS…
                                     run CMD under exactly the candidate policy (no broker); exits with its code
${FETCH_USAGE}${SEARCH_USAGE}${KEYS_USAGE}  fusion mcp [--repo DIR] [--root DIR…] MCP server on stdio (task, research-run and web tools; see README)
  fusion keys signing-init|signing-public [--data DIR]   Ed25519 key that signs task tarballs
  fusion audit export TASK -o FILE.tar [--data DIR] [--database-url postgres://…]
                                     the task's sealed tarball, from the database (cluster mode: the shared one)
  fusion audit verify TASK|FILE.tar [--file|--id] [--max-bytes N] [--pubkey FILE] [--replay [--repo DIR]] [--database-url postgres://…] [--json]
                                     offline; exit 1 names the first broken member
  fusion help [COMMAND]              this overview, or one command's help (also: fusion COMMAND --help)

Every command also takes --socket PATH and --data DIR (where to find the daemon).
Model specs: PROVIDER:MODEL[@BASE_URL], e.g. openai:qwen3@http://127.0.0.1:11434/v1,
anthropic:claude-sonnet-4-5, builtin:content-search. Keys: OPENAI_API_KEY / ANTHROPIC_API_KEY.
Environment: FUSION_HOME (data dir, default $XDG_STATE_HOME/fusion or ~/.local/state/fusion),
FUSION_SOCKET (default $FUSION_HOME/fusion.sock), FUSION_SANDBOX, FUSION_LOG_LEVEL,
FUSION_TASK_CONCURRENCY, FUSION_MODELS_FILE, FUSION_EGRESS_RESOLVE, FUSION_EGRESS_ALLOW_CIDRS.
Research runs: REDIS_URL (BullMQ queue bull:research-runs; FUSION_RESEARCH_QUEUE_PREFIX like --research-queue-prefix; unset → runs execute in the create request),
RESEARCH_WORKER_CONCURRENCY (default 4), RESEARCH_LOCK_DURATION_MS / RESEARCH_STALLED_INTERVAL_MS
(BullMQ lock and stalled-check intervals), FUSION_RESEARCH_DB (like --research-db).
Cluster mode: FUSION_DATABASE_URL (like --database-url) with REDIS_URL: daemons sharing both share the work;
FUSION_QUEUE_RECONCILE_MS (default 15000): how often each daemon re-adds the queue jobs Redis lost.
Web search: FUSION_SEARCH_PROVIDER (searxng|brave), FUSION_SEARCH_URL, FUSION_SEARCH_ALLOW_HOSTS, FUSION_SEARCH_API_KEY.
Input is validated before any daemon is contacted.
Exit codes: 0 ok, 1 task failed or runtime error, 2 invalid input or usage, 3 no daemon answered;
fetch and search: 3 refused by policy, 4 other fetch failure.
`;

const CONNECT = 'Connects to the daemon on --socket PATH (default $FUSION_SOCKET, else $FUSION_HOME/fusion.sock; --data DIR sets FUSION_HOME).\n';

export const COMMAND_HELP: Readonly<Record<string, string>> = {
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
`,
  research: `Usage:
${SUBMIT_USAGE}
${SOURCES_HELP}
--from-search QUERY runs one web search (fusion search) and lists its results; only with --yes do
the fetchable ones become sources (purpose: the result's rank, query and title). Without --yes
nothing is submitted (exit 2).
The arguments, sources included, are validated before any daemon is contacted (exit 2).
`,
  status: `Usage: fusion status ID [--json]\n\nPrints the task's state, error and usage so far.\n${CONNECT}`,
  tasks: `Usage: fusion tasks [--state S] [--limit N] [--json]\n\nLists tasks, newest first (at most N, 1–1000, default 100).\n${CONNECT}`,
  result: `Usage: fusion result ID [--delivery auto|inline|artifact] [--json]\n\nPrints the verified answer (header on stderr, text on stdout); never blocks, never truncates.\nThe JSON form carries "citations": the check of every quote in the answer.\n${CONNECT}`,
  wait: `Usage: fusion wait ID [--timeout SECONDS] [--json]\n\nWaits (at most 600 s) for the task to end; exit 0 when it completed.\n${CONNECT}`,
  cancel: `Usage: fusion cancel ID [--json]\n\nCancels a running task and waits until its sandboxes are gone; prints the task with its usage.\n${CONNECT}`,
  validate: 'Usage: fusion validate fusion_investigate|fusion_research [FILE|-]\n\nPrints the normalised arguments as JSON (exit 0) or the exact validation message (exit 2). Creates nothing.\n',
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
data directory; refuses to replace one); signing-public prints the public key (PEM) for auditors.
`,
  audit: `Usage: fusion audit export TASK -o FILE.tar [--data DIR] [--database-url postgres://…]
       fusion audit verify TASK|FILE.tar [--file|--id] [--max-bytes N] [--pubkey FILE] [--replay [--repo DIR]] [--data DIR] [--database-url postgres://…] [--json]

export writes the task's sealed tarball from the database: the data directory's, or in cluster
mode the shared PostgreSQL database (--database-url or FUSION_DATABASE_URL). verify checks a tarball offline (no
daemon): structure, signature (against --pubkey when given), every member digest, every log and
seal, the broker cross-checks and, with --replay, every repository tool call again. Exit 0 when
all hold; exit 1 naming the first broken member.
`,
  help: 'Usage: fusion help [COMMAND]\n',
};

/** `--help` or `-h` anywhere before a bare `--` (after it, the words belong to another program). */
export function wantsHelp(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).some((a) => a === '--help' || a === '-h');
}
