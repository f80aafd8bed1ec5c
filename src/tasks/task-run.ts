/**
 * Pieces of a task's run: the repository it reads (its snapshot), the readable copies of its
 * preflight records, the control the workflow drives it through, and the full-disk wait.
 */
import { join } from 'node:path';
import type { Logger } from '../log.js';
import { FusionError } from '../errors.js';
import { canonicalJson, sourcePolicy } from '../contracts/canonical.js';
import type { TaskState } from '../contracts/task-state.js';
import type { Store, TaskRecord } from '../store/port.js';
import { mkdirDurableAsync, writeFileDurableAsync } from '../common/durable-fs.js';
import { DEFAULT_REPO_EXCLUDES } from '../bundles/excludes.js';
import { taskPaths } from './paths.js';
import type { RepoSnapshotReport, TaskControl } from './runner-port.js';
import type { PackRequest } from '../bundles/pack-as-caller.js';
import type { PackedBundle } from '../bundles/pack.js';
import { snapshotJson, snapshotReport } from './intake.js';

/**
 * Repository snapshots (docs/operations.md#repository-snapshots): the repository is packed as
 * the caller into a bundle and the task runs over its verified, unpacked, root-owned tree,
 * never the submitter's path. In cluster mode it is packed at submission and stored with the
 * task (any daemon may run it); on a single host it is packed when the run starts (`install`),
 * and a resumed run reuses the tree it started over.
 */
export interface RepoBundles {
  pack(req: PackRequest): Promise<PackedBundle>;
  checkout(digest: string): Promise<string>;
  /** Single host: verifies and unpacks a bundle just packed here; its tree. Absent: single-host tasks read their path. */
  install?(bundle: { digest: string; data: Buffer }): Promise<string>;
  /** Holds a tree against pruning while a run uses it. */
  pin?(digest: string): () => void;
  /** The cap on a bundle's archive size, bytes. */
  maxBytes: number;
}

/** The checkpoint holding what the task's snapshot left out (RepoSnapshotReport). */
export const SNAPSHOT_CHECKPOINT = 'repo-snapshot';

/** A task's total wait for space before it fails storage_full, and the backoff between checks. */
export const STORAGE_WAIT_MS = 10 * 60_000;
export const STORAGE_BACKOFF_MS = { first: 1_000, max: 5_000 } as const;

export interface RunRepository {
  repoDir: string;
  report?: RepoSnapshotReport;
  /** A snapshot taken for this run, recorded by its first transition. */
  pending?: string;
  release: () => void;
}

export interface RepositoryDeps {
  store: Store;
  bundles: RepoBundles | undefined;
  /** Cluster mode: every task names its snapshot from submission. */
  clustered: boolean;
  daemonUid: number;
  log: Logger;
}

/**
 * The repository a run reads (docs/operations.md#repository-snapshots). A task that names a
 * snapshot runs over that one (cluster: fetched and verified; single host: the tree it
 * started over, or repo_snapshot_missing when it is gone: never the repository as it is now).
 * A single-host task starting its run is packed now, as its caller (the kernel decides what
 * the caller can read), and `pending` is the digest its first transition records.
 */
export async function repositoryFor(task: TaskRecord, signal: AbortSignal, deps: RepositoryDeps): Promise<RunRepository> {
  const { bundles, store } = deps;
  const none = (): void => undefined;
  if (bundles === undefined) return { repoDir: task.repoDir, release: none };
  const readReport = async (): Promise<RepoSnapshotReport | undefined> => {
    const text = await store.getCheckpoint(task.id, SNAPSHOT_CHECKPOINT);
    return text === null ? undefined : (JSON.parse(text) as RepoSnapshotReport);
  };
  if (task.bundleDigest !== null) {
    const release = bundles.pin?.(task.bundleDigest) ?? none;
    try {
      const repoDir = await bundles.checkout(task.bundleDigest);
      const report = await readReport();
      return { repoDir, release, ...(report !== undefined ? { report } : {}) };
    } catch (err) {
      release();
      throw err;
    }
  }
  if (deps.clustered || bundles.install === undefined) return { repoDir: task.repoDir, release: none };
  let caller: { uid: number; gid: number; groups: number[] | null } | undefined;
  if (task.callerUid !== null && task.callerUid !== 0 && task.callerUid !== deps.daemonUid) {
    if (task.callerGid === null || task.callerGid === undefined) {
      throw new FusionError('invalid_input', `the task records caller uid ${task.callerUid} without its groups, so its repository cannot be read as that caller; submit it again`, { details: { field: 'repo' } });
    }
    caller = { uid: task.callerUid, gid: task.callerGid, groups: task.callerGroups ?? null };
  }
  const started = Date.now();
  const packed = await bundles.pack({ repo: task.repoDir, exclude: task.options.repoExclude ?? DEFAULT_REPO_EXCLUDES, maxBytes: bundles.maxBytes, ...(caller !== undefined ? { caller } : {}), signal });
  const release = bundles.pin?.(packed.digest) ?? none;
  const bytes = packed.data.length;
  try {
    // The bytes move to the unpacking worker: not read after this.
    const repoDir = await bundles.install({ digest: packed.digest, data: packed.data });
    await store.saveCheckpoint(task.id, SNAPSHOT_CHECKPOINT, snapshotJson(packed));
    deps.log.info({ taskId: task.id, bundleDigest: packed.digest, bundleBytes: bytes, entries: packed.entries, skipped: packed.skipped.counts, ms: Date.now() - started }, 'repository snapshot taken');
    return { repoDir, report: snapshotReport(packed), pending: packed.digest, release };
  } catch (err) {
    release();
    throw err;
  }
}

/** Readable copies of the committed preflight records in the task directory (for admins and tarballs). */
export async function writeTaskFiles(tasksDir: string, task: TaskRecord): Promise<void> {
  // Off the event loop: a synchronous fsync here would stall every receipt of a flood.
  const paths = taskPaths(tasksDir, task.id);
  await mkdirDurableAsync(paths.dir, 0o700);
  await writeFileDurableAsync(paths.inputFile, task.canonicalInput);
  await writeFileDurableAsync(paths.budgetFile, task.budgetPlan);
  if (task.workflow === 'research') {
    await writeFileDurableAsync(join(paths.dir, 'source-policy.json'), canonicalJson(sourcePolicy(JSON.parse(task.canonicalInput) as Parameters<typeof sourcePolicy>[0])));
  }
}

export interface ControlDeps {
  store: Store;
  /** Publishes the task's new committed events. */
  publish: (taskId: string) => Promise<void>;
  get: (taskId: string) => Promise<TaskRecord>;
  /** Seals a task that just became terminal. */
  terminalHook: (taskId: string) => Promise<void>;
  log: Logger;
}

/** The control the workflow drives a run through; `pendingDigest`: a snapshot taken for this run, recorded by its first transition (same transaction). */
export function taskControl(task: TaskRecord, pendingDigest: string | undefined, deps: ControlDeps): TaskControl {
  let current: TaskState = task.state;
  let pending = pendingDigest;
  const { store } = deps;
  const moved = async (next: TaskRecord | null, to: TaskState): Promise<TaskRecord> => {
    if (next) {
      current = next.state;
      await deps.publish(task.id);
      deps.log.info({ taskId: task.id, state: to }, 'task state changed');
      return next;
    }
    const fresh = await deps.get(task.id);
    if (fresh.state === 'cancelled') throw new FusionError('cancelled', 'the task was cancelled');
    throw new FusionError('invalid_transition', `task is ${fresh.state}, expected ${current} before moving to ${to}`);
  };
  return {
    taskId: task.id,
    store,
    transition: async (to, patch) => {
      const withDigest = pending !== undefined ? { ...patch, bundleDigest: pending } : patch;
      const next = await moved(await store.transitionTask(task.id, current, to, withDigest), to);
      pending = undefined;
      return next;
    },
    commit: async (result, patch) => {
      const next = await store.commitResult(result, patch);
      // Sealed before anyone is told the task completed, so bg_result can check the seal.
      if (next) await deps.terminalHook(task.id);
      return moved(next, 'completed');
    },
    progress: async (data) => {
      await store.appendEvent(task.id, 'progress', data);
      await deps.publish(task.id);
    },
  };
}

/** A task that ran: past `queued` (a resume of it counts against the restart-recovery limit). */
export function hasRun(state: TaskState): boolean {
  return state !== 'initializing' && state !== 'queued';
}

export function storageFullError(waitedMs: number | undefined, cause?: unknown): FusionError {
  const waited = waitedMs === undefined ? '' : ` for ${Math.round(waitedMs / 1000)} s`;
  return new FusionError('storage_full', `the disk holding the daemon's data stayed full${waited} while the task ran; its committed stages are kept. Free space and submit it again.`, { cause });
}

export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** Sleeps `ms`, then waits (polling at `ms`) until `hasSpace` holds; false when the wait ended without space. */
export async function waitForSpace(ms: number, until: number, signal: AbortSignal, hasSpace: () => boolean): Promise<boolean> {
  for (;;) {
    await sleep(ms, signal);
    if (signal.aborted || Date.now() >= until) return false;
    if (hasSpace()) return true;
  }
}

export async function settleWithin(p: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p, new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}
