/**
 * The one table of the CLI's options: flag, environment variable, kind, default, help and the
 * commands that take it. The argv parser's flag sets (`flagSpecFor`), the daemon settings
 * (`settings.ts`), the help texts (`cli/help.ts`) and shell completion (`cli/completion.ts`) are
 * all generated from it, so a flag cannot be documented in one place and unknown in another.
 *
 * Precedence for every option: flag, then environment variable, then default. A flag name may
 * appear in several rows when it means different things to different commands (`--timeout` of
 * `wait` and of `models check`), but never twice for one command (tested).
 *
 * This module stays light (no daemon code): the CLI imports it before it knows the command.
 */
import type { DaemonConfigInput } from '../contracts/config.js';
import type { FlagSpec } from './args.js';

export const COMMANDS = [
  'daemon',
  'investigate',
  'research',
  'status',
  'tasks',
  'logs',
  'result',
  'wait',
  'cancel',
  'validate',
  'models',
  'sandbox',
  'fetch',
  'search',
  'mcp',
  'keys',
  'audit',
  'completion',
  'help',
] as const;
export type Command = (typeof COMMANDS)[number];

/**
 * text: one value; int: a whole number ≥ 0; bool: a switch (`--x`; its variable `1`/`0`);
 * list: repeatable flag, its variable comma-separated (both add up); choice: one of `choices`.
 */
export type OptionKind = 'text' | 'int' | 'bool' | 'list' | 'choice';

export interface OptionDef {
  /** Flag name without `--`; absent for a setting read only from the environment. */
  readonly flag?: string;
  /** Environment variable read when the flag is absent. */
  readonly env?: string;
  readonly kind: OptionKind;
  /** The value's name in help (`N`, `DIR`); the choices for a choice. */
  readonly metavar?: string;
  readonly choices?: readonly string[];
  /** The default as shown in help (the daemon's own defaults live in contracts/config.ts). */
  readonly default?: string;
  readonly help: string;
  readonly commands: readonly Command[];
  /** The daemon setting this option fills (settings.ts builds the daemon input from these). */
  readonly key?: keyof DaemonConfigInput;
  /** An int value is multiplied by this (MiB flags filling byte settings). */
  readonly scale?: number;
  /** A path value, made absolute against the working directory. */
  readonly path?: boolean;
  /** May also be given before the command (`fusion --data DIR tasks`). */
  readonly global?: boolean;
  /**
   * A daemon setting that matters to the embedded daemon `--wait` (or `fusion mcp`) starts: listed
   * in those commands' help. Their other daemon settings are accepted too, but listed only by
   * `fusion daemon --help` (a first-time user of `fusion investigate` needs none of them).
   */
  readonly embedded?: boolean;
}

const SANDBOXES = ['auto', 'bwrap', 'docker', 'gvisor'] as const;
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
const MIB = 1024 * 1024;

/** Commands that run a daemon (the daemon itself; --wait and mcp start an embedded one with the same flags). */
const DAEMONS: readonly Command[] = ['daemon', 'investigate', 'research', 'mcp'];
/** Commands that talk to a daemon over its socket. */
const CLIENTS: readonly Command[] = [...DAEMONS, 'status', 'tasks', 'logs', 'result', 'wait', 'cancel'];
const SUBMIT: readonly Command[] = ['investigate', 'research'];
const MODELS: readonly Command[] = [...DAEMONS, 'models'];
const SEAMS: readonly Command[] = [...DAEMONS, 'fetch', 'search'];
/** Commands that print data: each takes --json. */
const PRINTS_DATA: readonly Command[] = [...CLIENTS.filter((c) => c !== 'daemon' && c !== 'mcp'), 'validate', 'models', 'fetch', 'search', 'keys', 'audit'];

export const OPTIONS: readonly OptionDef[] = [
  // Where the daemon is.
  { flag: 'data', env: 'FUSION_HOME', kind: 'text', metavar: 'DIR', default: '$XDG_STATE_HOME/fusion, else ~/.local/state/fusion', help: 'data directory (database, socket, task directories), created 0700', commands: [...CLIENTS, 'keys', 'audit'], global: true },
  { flag: 'socket', env: 'FUSION_SOCKET', kind: 'text', metavar: 'PATH', default: '$FUSION_HOME/fusion.sock (/run/fusion/fusion.sock with --socket-group)', help: "the daemon's Unix socket", commands: CLIENTS, global: true },
  { flag: 'json', kind: 'bool', help: 'print machine-readable JSON instead of text', commands: PRINTS_DATA, global: true },
  { flag: 'help', kind: 'bool', help: "print this command's help and start nothing (also -h)", commands: COMMANDS.filter((c) => c !== 'help'), global: true },
  // The daemon.
  { flag: 'socket-group', env: 'FUSION_SOCKET_GROUP', kind: 'text', metavar: 'GROUP', default: 'off', help: 'socket 0660 for GROUP: its members submit and see their own tasks (root daemon)', commands: DAEMONS, key: 'socketGroup' },
  { flag: 'sandbox', env: 'FUSION_SANDBOX', kind: 'choice', choices: SANDBOXES, default: 'auto', help: 'sandbox backend (for investigate/research: this task\'s, and an embedded daemon\'s)', commands: DAEMONS, key: 'sandbox', embedded: true },
  { flag: 'sandbox-uids', env: 'FUSION_SANDBOX_UIDS', kind: 'text', metavar: 'START-END', default: '2100000000-2100065535', help: 'uids (and equal gids) a root daemon leases, one per sandbox', commands: [...DAEMONS, 'sandbox'], key: 'sandboxUids' },
  { flag: 'sandbox-rlimit-fallback', env: 'FUSION_SANDBOX_RLIMIT', kind: 'bool', default: 'off', help: 'let bwrap run with rlimits only on a host without a usable cgroup (memory not really capped)', commands: DAEMONS, key: 'sandboxRlimitFallback', embedded: true },
  { flag: 'log-level', env: 'FUSION_LOG_LEVEL', kind: 'choice', choices: LOG_LEVELS, default: 'info (--wait\'s embedded daemon: error; mcp\'s, sandbox exec: warn)', help: 'log level (JSON logs on stderr)', commands: [...DAEMONS, 'sandbox'], key: 'logLevel', embedded: true },
  { flag: 'concurrency', env: 'FUSION_TASK_CONCURRENCY', kind: 'int', metavar: 'N', default: '2', help: 'tasks running at once (1–64); more wait in arrival order', commands: DAEMONS, key: 'taskConcurrency' },
  { flag: 'max-queued', env: 'FUSION_MAX_QUEUED', kind: 'int', metavar: 'N', default: '256', help: 'accepted tasks that may wait for a run slot', commands: DAEMONS, key: 'maxQueuedTasks' },
  { flag: 'max-queued-per-caller', env: 'FUSION_MAX_QUEUED_PER_CALLER', kind: 'int', metavar: 'N', default: '256', help: 'waiting tasks per caller', commands: DAEMONS, key: 'maxQueuedPerCaller' },
  { flag: 'storage-reserve-mb', env: 'FUSION_STORAGE_RESERVE_MB', kind: 'int', metavar: 'N', default: '64', help: "free MiB the data directory's disk must keep (below it submits are storage_full)", commands: DAEMONS, key: 'storageReserveBytes', scale: MIB },
  { flag: 'keep-attempt-files', env: 'FUSION_KEEP_ATTEMPT_FILES', kind: 'bool', default: 'off', help: "keep each attempt's files in the task directory after the task tarball is sealed", commands: DAEMONS, key: 'keepAttemptFiles' },
  { flag: 'models-file', env: 'FUSION_MODELS_FILE', kind: 'text', metavar: 'FILE', default: 'the builtin engine', help: 'model roster (JSON)', commands: MODELS, key: 'modelsFile', path: true, embedded: true },
  { flag: 'candidate-model', kind: 'list', metavar: 'SPEC', help: 'candidate model, once (self-fusion) or three times; SPEC is PROVIDER:MODEL[@BASE_URL]', commands: MODELS, key: 'candidateModels', embedded: true },
  { flag: 'evaluator-model', kind: 'text', metavar: 'SPEC', help: 'evaluator model', commands: MODELS, key: 'evaluatorModel', embedded: true },
  { flag: 'merger-model', kind: 'text', metavar: 'SPEC', help: 'merger model', commands: MODELS, key: 'mergerModel', embedded: true },
  { flag: 'resolve', env: 'FUSION_EGRESS_RESOLVE', kind: 'list', metavar: 'HOST:IP', help: 'egress admin seam: resolve HOST to IP (repeatable; variable comma-separated); a task command given it refuses a running daemon that lacks it', commands: SEAMS, key: 'egressResolve', embedded: true },
  { flag: 'allow-cidr', env: 'FUSION_EGRESS_ALLOW_CIDRS', kind: 'list', metavar: 'CIDR', help: 'egress admin seam: treat CIDR as public (repeatable; variable comma-separated); a task command given it refuses a running daemon that lacks it', commands: SEAMS, key: 'egressAllowCidrs', embedded: true },
  { flag: 'listen', kind: 'text', metavar: 'HOST:PORT', default: 'off', help: 'serve the research API (and only it) over TCP', commands: DAEMONS, key: 'listen' },
  { flag: 'listen-public', kind: 'bool', default: 'off', help: 'allow a non-loopback --listen or --dashboard address (plain HTTP: put TLS in front)', commands: DAEMONS, key: 'listenPublic' },
  { flag: 'dashboard', env: 'FUSION_DASHBOARD', kind: 'text', metavar: 'HOST:PORT', default: 'off', help: 'serve the read-only web dashboard (loopback: callers by local uid)', commands: ['daemon'], key: 'dashboard' },
  { flag: 'research-store', kind: 'choice', choices: ['sqlite', 'memory'], default: 'sqlite', help: 'where research runs live (memory: lost when the daemon stops)', commands: DAEMONS, key: 'researchStore' },
  { flag: 'research-db', env: 'FUSION_RESEARCH_DB', kind: 'text', metavar: 'FILE', default: "the data directory's fusion.db", help: 'research database (runs and API keys)', commands: [...DAEMONS, 'keys'], key: 'researchDb', path: true },
  { flag: 'research-user-agent', kind: 'text', metavar: 'UA', default: 'FluxusResearchBot', help: 'User-Agent of research crawls', commands: DAEMONS, key: 'researchUserAgent' },
  { flag: 'research-queue-prefix', env: 'FUSION_RESEARCH_QUEUE_PREFIX', kind: 'text', metavar: 'bull|cluster|PREFIX', default: 'bull (cluster mode: cluster)', help: 'Redis key prefix of the research-runs queue', commands: DAEMONS, key: 'researchQueuePrefix' },
  { flag: 'database-url', env: 'FUSION_DATABASE_URL', kind: 'text', metavar: 'postgres://…', default: 'the SQLite file', help: 'cluster mode: state and artefacts in this PostgreSQL database', commands: [...DAEMONS, 'keys', 'audit'], key: 'databaseUrl' },
  // Read from the environment only.
  { env: 'REDIS_URL', kind: 'text', default: 'unset (runs execute in the create request)', help: 'Redis of the BullMQ research queue (and, in cluster mode, the task queues)', commands: DAEMONS, key: 'redisUrl' },
  { env: 'RESEARCH_WORKER_CONCURRENCY', kind: 'int', default: '4', help: 'queued research runs worked at once per daemon', commands: DAEMONS, key: 'researchWorkerConcurrency' },
  { env: 'RESEARCH_LOCK_DURATION_MS', kind: 'int', default: "BullMQ's (30000)", help: 'BullMQ lock duration of a research run', commands: DAEMONS, key: 'researchLockMs' },
  { env: 'RESEARCH_STALLED_INTERVAL_MS', kind: 'int', default: "BullMQ's (30000)", help: 'BullMQ stalled-check interval of research runs', commands: DAEMONS, key: 'researchStalledMs' },
  { env: 'FUSION_TASK_LEASE_MS', kind: 'int', default: '30000', help: "cluster mode: a task's lease (renewed at half of it)", commands: DAEMONS, key: 'taskLeaseMs' },
  { env: 'FUSION_TASK_STALLED_CHECK_MS', kind: 'int', default: '30000', help: 'cluster mode: how often stalled tasks are looked for', commands: DAEMONS, key: 'taskStalledCheckMs' },
  { env: 'FUSION_QUEUE_RECONCILE_MS', kind: 'int', default: '15000', help: 'cluster mode: how often each daemon re-adds the queue jobs Redis lost', commands: DAEMONS, key: 'queueReconcileMs' },
  { env: 'FUSION_SHUTDOWN_TIMEOUT_S', kind: 'int', default: '30', help: 'how long a stop may take (1–3600 s); past it the daemon exits 1', commands: DAEMONS, key: 'shutdownTimeoutS' },
  { env: 'FUSION_DAEMON_ID', kind: 'text', default: 'host name and pid', help: 'names this daemon in cluster events', commands: DAEMONS, key: 'daemonId' },
  { env: 'FUSION_BUNDLE_MAX_MB', kind: 'int', default: '256', help: "cluster mode: cap on a task's repository bundle, MiB", commands: DAEMONS, key: 'bundleMaxBytes', scale: MIB },
  // Submitting a task.
  { flag: 'objective', kind: 'text', metavar: 'TEXT', help: 'what the job must find out', commands: SUBMIT },
  { flag: 'background', kind: 'list', metavar: 'TEXT', help: 'context the job starts from (repeatable; at least one)', commands: SUBMIT },
  { flag: 'deliverable', kind: 'text', metavar: 'TEXT', help: 'what the answer must contain', commands: SUBMIT },
  { flag: 'scope', kind: 'list', metavar: 'TEXT', help: 'where to look (repeatable)', commands: SUBMIT },
  { flag: 'constraint', kind: 'list', metavar: 'TEXT', help: 'a rule the job must keep (repeatable)', commands: SUBMIT },
  { flag: 'source', kind: 'list', metavar: 'URL', help: 'research source: --source URL --purpose TEXT, or --source URL=PURPOSE (repeatable)', commands: SUBMIT },
  { flag: 'purpose', kind: 'list', metavar: 'TEXT', help: 'the purpose of the --source just before it', commands: SUBMIT },
  { flag: 'input', kind: 'text', metavar: 'FILE|-', help: 'the tool arguments as JSON (instead of the flags above)', commands: SUBMIT },
  { flag: 'repo', kind: 'text', metavar: 'DIR', default: 'the current directory', help: 'the repository the job reads', commands: [...SUBMIT, 'mcp', 'sandbox', 'audit'] },
  { flag: 'root', kind: 'list', metavar: 'DIR', help: 'a repository root the MCP server offers (repeatable); a task tool\'s `repo` must lie inside one', commands: ['mcp'] },
  { flag: 'wait', kind: 'bool', help: 'follow the task and print the verified answer (starts an embedded daemon when none answers)', commands: SUBMIT },
  { flag: 'from-search', kind: 'text', metavar: 'QUERY', help: 'research: list one web search\'s results as sources (submitted only with --yes)', commands: SUBMIT },
  { flag: 'search-count', kind: 'int', metavar: 'N', default: '10', help: 'results --from-search asks for (1–20)', commands: SUBMIT },
  { flag: 'yes', kind: 'bool', help: 'submit the --from-search results as sources', commands: SUBMIT },
  // Reading tasks.
  { flag: 'state', kind: 'text', metavar: 'STATE', help: 'only tasks in this state', commands: ['tasks'] },
  { flag: 'limit', kind: 'int', metavar: 'N', default: '100', help: 'at most N tasks, newest first (1–1000)', commands: ['tasks'] },
  { flag: 'watch', kind: 'bool', help: 'redraw the table as tasks change (every event, at least every 5 s)', commands: ['tasks'] },
  { flag: 'follow', kind: 'bool', help: 'keep printing events until the task ends', commands: ['logs'] },
  { flag: 'delivery', kind: 'choice', choices: ['auto', 'inline', 'artifact'], default: 'auto', help: 'inline text or a stored artifact', commands: ['result'] },
  { flag: 'timeout', kind: 'int', metavar: 'SECONDS', default: '600', help: 'wait at most this long (0–86400; 0 reports the state at once); expiring exits 124 "timed out"', commands: ['wait'] },
  // Other commands.
  { flag: 'timeout', kind: 'int', metavar: 'SECONDS', default: '60', help: 'per-model request timeout', commands: ['models'] },
  { flag: 'backend', kind: 'choice', choices: SANDBOXES, env: 'FUSION_SANDBOX', default: 'auto', help: 'sandbox backend', commands: ['sandbox'] },
  { flag: 'out', kind: 'text', metavar: 'DIR', default: 'a temporary directory, removed afterwards', help: 'writable at /out', commands: ['sandbox'] },
  { flag: 'extract', kind: 'choice', choices: ['text', 'markdown'], help: 'print the extracted text instead of the raw body', commands: ['fetch'] },
  { flag: 'count', kind: 'int', metavar: 'N', default: '10', help: 'results to ask for (1–20)', commands: ['search'] },
  { flag: 'workspace', kind: 'text', metavar: 'W', help: 'keys create: the workspace the key is for', commands: ['keys'] },
  { flag: 'kind', kind: 'choice', choices: ['workspace', 'personal', 'copilot'], help: 'keys create: the kind of key', commands: ['keys'] },
  { flag: 'out', kind: 'text', metavar: 'FILE.tar', help: 'audit export: where to write the tarball (also -o)', commands: ['audit'] },
  { flag: 'pubkey', kind: 'text', metavar: 'FILE', help: 'audit verify: the signer public key to pin', commands: ['audit'] },
  { flag: 'replay', kind: 'bool', help: 'audit verify: replay every repository tool call against the checkout', commands: ['audit'] },
  { flag: 'file', kind: 'bool', help: 'audit verify: the target is a tarball file', commands: ['audit'] },
  { flag: 'id', kind: 'bool', help: 'audit verify: the target is a task id', commands: ['audit'] },
  { flag: 'max-bytes', env: 'FUSION_AUDIT_MAX_BYTES', kind: 'int', metavar: 'N', default: '268435456', help: 'audit verify: largest tarball read', commands: ['audit'] },
  // Read by the processes that search or serve MCP (never by the daemon).
  { env: 'FUSION_SEARCH_PROVIDER', kind: 'choice', choices: ['searxng', 'brave'], help: 'web search provider', commands: ['search', 'research', 'mcp'] },
  { env: 'FUSION_SEARCH_URL', kind: 'text', help: "the provider's base URL (brave: https://api.search.brave.com)", commands: ['search', 'research', 'mcp'] },
  { env: 'FUSION_SEARCH_ALLOW_HOSTS', kind: 'list', help: 'hosts search may reach (the URL\'s host must be listed)', commands: ['search', 'research', 'mcp'] },
  { env: 'FUSION_SEARCH_API_KEY', kind: 'text', help: 'Brave subscription token (never logged)', commands: ['search', 'research', 'mcp'] },
  { env: 'FUSION_RESEARCH_API_KEY', kind: 'text', help: 'research API key of the MCP tool research_run', commands: ['mcp'] },
  { env: 'FUSION_MCP_MAX_MESSAGE_BYTES', kind: 'int', help: 'largest MCP message accepted', commands: ['mcp'] },
];

/** The rows a command takes. */
export function optionsOf(command: Command): OptionDef[] {
  return OPTIONS.filter((o) => o.commands.includes(command));
}

/** Commands that start an embedded daemon when none answers (`--wait`, `fusion mcp`). */
const EMBEDDERS: readonly Command[] = ['investigate', 'research', 'mcp'];

/**
 * The rows a command's help lists: all it takes, except, for a command that starts an embedded
 * daemon, the daemon settings that do not matter there (`fusion daemon --help` lists those).
 */
export function helpOptionsOf(command: Command): OptionDef[] {
  const rows = optionsOf(command);
  return EMBEDDERS.includes(command) ? rows.filter((o) => o.key === undefined || o.embedded === true) : rows;
}

/** The flags a command accepts, for the argv parser. */
export function flagSpecFor(command: Command): Record<string, FlagSpec> {
  const spec: Record<string, FlagSpec> = {};
  for (const o of optionsOf(command)) {
    if (o.flag === undefined) continue;
    spec[o.flag] = { ...(o.kind === 'bool' ? {} : { value: true }), ...(o.kind === 'list' ? { repeat: true } : {}) };
  }
  return spec;
}

/** The row of `flag` for `command` (undefined when the command does not take it). */
export function optionFor(command: Command, flag: string): OptionDef | undefined {
  return OPTIONS.find((o) => o.flag === flag && o.commands.includes(command));
}

/** How an option is named in messages: `--concurrency / FUSION_TASK_CONCURRENCY`. */
export function optionLabel(o: OptionDef): string {
  if (o.flag !== undefined && o.env !== undefined) return `--${o.flag} / ${o.env}`;
  return o.flag !== undefined ? `--${o.flag}` : o.env!;
}

/** `--flag VALUE` as help shows it. */
export function flagSynopsis(o: OptionDef): string {
  if (o.flag === undefined) return '';
  if (o.kind === 'bool') return `--${o.flag}`;
  const value = o.kind === 'choice' ? o.choices!.join('|') : (o.metavar ?? 'VALUE');
  return `--${o.flag} ${value}${o.kind === 'list' ? '…' : ''}`;
}

export function isCommand(word: string): word is Command {
  return (COMMANDS as readonly string[]).includes(word);
}

/** A daemon setting named with the option that sets it: `taskConcurrency (--concurrency or FUSION_TASK_CONCURRENCY)`. */
export function configFieldLabel(field: string): string {
  const o = OPTIONS.find((row) => row.key === field);
  return o === undefined ? field : `${field} (${optionLabel(o)})`;
}
