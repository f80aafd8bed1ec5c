/**
 * Resolves the data directory, socket and daemon settings from flags and the environment.
 * Precedence: flag > environment > default. `FUSION_HOME` defaults to
 * `$XDG_STATE_HOME/fusion` or `~/.local/state/fusion`.
 *
 * Sockets: a daemon's default is `$FUSION_HOME/fusion.sock`, or SHARED_SOCKET with
 * --socket-group (the data directory stays 0700, so a shared socket lives elsewhere). A client
 * without --socket/FUSION_SOCKET uses its own home's socket, or SHARED_SOCKET when only that one
 * exists: a local agent account finds the shared daemon with no settings. A client given a data
 * directory (--data, FUSION_HOME) uses that directory's socket only.
 */
import { lstatSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import type { DaemonConfigInput } from '../contracts/config.js';
import { dataPaths } from '../tasks/paths.js';
import { flag, flagAll, has, type ParsedArgs } from './args.js';

export type Env = Record<string, string | undefined>;

export function resolveHome(args: ParsedArgs, env: Env): string {
  const explicit = flag(args, 'data') ?? env.FUSION_HOME;
  if (explicit) return resolve(explicit);
  const state = env.XDG_STATE_HOME && env.XDG_STATE_HOME.trim() !== '' ? env.XDG_STATE_HOME : join(homedir(), '.local', 'state');
  return join(state, 'fusion');
}

/** The default socket of a daemon started with --socket-group (docs/operations.md#agent-accounts). */
export const SHARED_SOCKET = '/run/fusion/fusion.sock';

/** What is at `path`: a socket, nothing, or something this user may not look at (EACCES on a directory above it). */
function socketAt(path: string): 'socket' | 'none' | 'denied' {
  try {
    return lstatSync(path).isSocket() ? 'socket' : 'none';
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'EACCES' || code === 'EPERM' ? 'denied' : 'none';
  }
}

/**
 * The socket a client talks to (`shared`: SHARED_SOCKET, a parameter for tests). An explicit
 * data directory (--data, FUSION_HOME) means that directory's daemon or none: another data
 * directory's shared daemon would be handed this caller's repository and URLs. Without one,
 * the shared socket is used when the home has none and the shared one exists, or exists behind
 * a directory this user may not enter (connecting then says which group admits it, rather than
 * "no daemon" and an embedded daemon started as this user).
 */
export function resolveSocket(args: ParsedArgs, env: Env, shared: string = SHARED_SOCKET): string {
  const explicit = flag(args, 'socket') ?? env.FUSION_SOCKET;
  if (explicit) return resolve(explicit);
  const own = dataPaths(resolveHome(args, env)).defaultSocket;
  if (flag(args, 'data') || env.FUSION_HOME) return own;
  if (socketAt(own) === 'socket') return own;
  return socketAt(shared) === 'none' ? own : shared;
}

/** The socket a daemon listens on (never discovered: a daemon does not take over another's path). */
export function resolveDaemonSocket(args: ParsedArgs, env: Env): string {
  const explicit = flag(args, 'socket') ?? env.FUSION_SOCKET;
  if (explicit) return resolve(explicit);
  return socketGroupOf(args, env) !== undefined ? SHARED_SOCKET : dataPaths(resolveHome(args, env)).defaultSocket;
}

function socketGroupOf(args: ParsedArgs, env: Env): string | undefined {
  const group = flag(args, 'socket-group') ?? env.FUSION_SOCKET_GROUP;
  return group !== undefined && group.trim() !== '' ? group.trim() : undefined;
}

function csv(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function intFrom(value: string | undefined): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  return Number(value);
}

export function daemonConfigInput(args: ParsedArgs, env: Env): DaemonConfigInput {
  const sandbox = flag(args, 'sandbox') ?? env.FUSION_SANDBOX;
  const logLevel = flag(args, 'log-level') ?? env.FUSION_LOG_LEVEL;
  const concurrency = intFrom(flag(args, 'concurrency') ?? env.FUSION_TASK_CONCURRENCY);
  const maxQueued = intFrom(flag(args, 'max-queued') ?? env.FUSION_MAX_QUEUED);
  const maxPerCaller = intFrom(flag(args, 'max-queued-per-caller') ?? env.FUSION_MAX_QUEUED_PER_CALLER);
  const reserveMb = intFrom(flag(args, 'storage-reserve-mb') ?? env.FUSION_STORAGE_RESERVE_MB);
  const databaseUrl = (flag(args, 'database-url') ?? env.FUSION_DATABASE_URL)?.trim();
  const leaseMs = intFrom(env.FUSION_TASK_LEASE_MS);
  const stalledCheckMs = intFrom(env.FUSION_TASK_STALLED_CHECK_MS);
  const reconcileMs = intFrom(env.FUSION_QUEUE_RECONCILE_MS);
  const shutdownTimeoutS = intFrom(env.FUSION_SHUTDOWN_TIMEOUT_S);
  const daemonId = env.FUSION_DAEMON_ID?.trim();
  const bundleMaxMb = intFrom(env.FUSION_BUNDLE_MAX_MB);
  const sandboxUids = flag(args, 'sandbox-uids') ?? env.FUSION_SANDBOX_UIDS;
  const socketGroup = socketGroupOf(args, env);
  return {
    home: resolveHome(args, env),
    socketPath: resolveDaemonSocket(args, env),
    ...(socketGroup !== undefined ? { socketGroup } : {}),
    ...(sandbox ? { sandbox: sandbox as 'auto' } : {}),
    ...(logLevel ? { logLevel: logLevel as 'info' } : {}),
    ...(concurrency !== undefined ? { taskConcurrency: concurrency } : {}),
    ...(maxQueued !== undefined ? { maxQueuedTasks: maxQueued } : {}),
    ...(maxPerCaller !== undefined ? { maxQueuedPerCaller: maxPerCaller } : {}),
    ...(reserveMb !== undefined ? { storageReserveBytes: reserveMb * 1024 * 1024 } : {}),
    ...(databaseUrl ? { databaseUrl } : {}),
    ...(leaseMs !== undefined ? { taskLeaseMs: leaseMs } : {}),
    ...(stalledCheckMs !== undefined ? { taskStalledCheckMs: stalledCheckMs } : {}),
    ...(reconcileMs !== undefined ? { queueReconcileMs: reconcileMs } : {}),
    ...(shutdownTimeoutS !== undefined ? { shutdownTimeoutS } : {}),
    ...(daemonId ? { daemonId } : {}),
    ...(bundleMaxMb !== undefined ? { bundleMaxBytes: bundleMaxMb * 1024 * 1024 } : {}),
    ...(sandboxUids ? { sandboxUids: sandboxUids.trim() } : {}),
    ...(has(args, 'keep-attempt-files') || env.FUSION_KEEP_ATTEMPT_FILES === '1' ? { keepAttemptFiles: true } : {}),
    ...(has(args, 'sandbox-rlimit-fallback') || env.FUSION_SANDBOX_RLIMIT === '1' ? { sandboxRlimitFallback: true } : {}),
    ...(flag(args, 'models-file') ? { modelsFile: resolve(flag(args, 'models-file')!) } : {}),
    candidateModels: flagAll(args, 'candidate-model'),
    ...(flag(args, 'evaluator-model') ? { evaluatorModel: flag(args, 'evaluator-model') } : {}),
    ...(flag(args, 'merger-model') ? { mergerModel: flag(args, 'merger-model') } : {}),
    egressResolve: [...csv(env.FUSION_EGRESS_RESOLVE), ...flagAll(args, 'resolve')],
    egressAllowCidrs: [...csv(env.FUSION_EGRESS_ALLOW_CIDRS), ...flagAll(args, 'allow-cidr')],
    ...researchConfigInput(args, env),
  };
}

/** The research-run settings: flags, REDIS_URL and the RESEARCH_* variables. */
function researchConfigInput(args: ParsedArgs, env: Env): Partial<DaemonConfigInput> {
  const store = flag(args, 'research-store');
  const db = flag(args, 'research-db') ?? env.FUSION_RESEARCH_DB;
  const ua = flag(args, 'research-user-agent');
  const redisUrl = env.REDIS_URL?.trim();
  const concurrency = intFrom(env.RESEARCH_WORKER_CONCURRENCY);
  const lockMs = intFrom(env.RESEARCH_LOCK_DURATION_MS);
  const stalledMs = intFrom(env.RESEARCH_STALLED_INTERVAL_MS);
  const queuePrefix = flag(args, 'research-queue-prefix') ?? env.FUSION_RESEARCH_QUEUE_PREFIX?.trim();
  return {
    ...(flag(args, 'listen') ? { listen: flag(args, 'listen') } : {}),
    ...(has(args, 'listen-public') ? { listenPublic: true } : {}),
    ...(store ? { researchStore: store as 'sqlite' } : {}),
    ...(db ? { researchDb: resolve(db) } : {}),
    ...(ua ? { researchUserAgent: ua } : {}),
    ...(redisUrl ? { redisUrl } : {}),
    ...(concurrency !== undefined ? { researchWorkerConcurrency: concurrency } : {}),
    ...(lockMs !== undefined ? { researchLockMs: lockMs } : {}),
    ...(stalledMs !== undefined ? { researchStalledMs: stalledMs } : {}),
    ...(queuePrefix ? { researchQueuePrefix: queuePrefix } : {}),
  };
}

/** The process environment, for library callers that pass none (only cli/ and main.ts read it). */
export function processEnv(): Env {
  return process.env;
}
