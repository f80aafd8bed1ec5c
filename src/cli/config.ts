/**
 * Resolves the data directory, socket and daemon settings from flags and the environment.
 * Precedence: flag > environment > default. `FUSION_HOME` defaults to
 * `$XDG_STATE_HOME/fusion` or `~/.local/state/fusion`.
 */
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

export function resolveSocket(args: ParsedArgs, env: Env): string {
  const explicit = flag(args, 'socket') ?? env.FUSION_SOCKET;
  return explicit ? resolve(explicit) : dataPaths(resolveHome(args, env)).defaultSocket;
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
  const daemonId = env.FUSION_DAEMON_ID?.trim();
  const uid = intFrom(env.FUSION_SANDBOX_UID);
  const gid = intFrom(env.FUSION_SANDBOX_GID);
  return {
    home: resolveHome(args, env),
    socketPath: resolveSocket(args, env),
    ...(sandbox ? { sandbox: sandbox as 'auto' } : {}),
    ...(logLevel ? { logLevel: logLevel as 'info' } : {}),
    ...(concurrency !== undefined ? { taskConcurrency: concurrency } : {}),
    ...(maxQueued !== undefined ? { maxQueuedTasks: maxQueued } : {}),
    ...(maxPerCaller !== undefined ? { maxQueuedPerCaller: maxPerCaller } : {}),
    ...(reserveMb !== undefined ? { storageReserveBytes: reserveMb * 1024 * 1024 } : {}),
    ...(databaseUrl ? { databaseUrl } : {}),
    ...(leaseMs !== undefined ? { taskLeaseMs: leaseMs } : {}),
    ...(stalledCheckMs !== undefined ? { taskStalledCheckMs: stalledCheckMs } : {}),
    ...(daemonId ? { daemonId } : {}),
    ...(uid !== undefined ? { sandboxUid: uid } : {}),
    ...(gid !== undefined ? { sandboxGid: gid } : {}),
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
  };
}

/** The process environment, for library callers that pass none (only cli/ and main.ts read it). */
export function processEnv(): Env {
  return process.env;
}
