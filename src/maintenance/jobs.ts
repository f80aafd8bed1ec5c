/**
 * The maintenance jobs themselves (scheduled by scheduler.ts). Each returns a summary that the
 * scheduler logs; none of them ever touches a task this daemon is running.
 */
import { closeSync, constants, lstatSync, openSync, readdirSync, rmSync, rmdirSync, statSync, readFileSync, renameSync, unlinkSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Store } from '../store/port.js';
import { taskPaths } from '../tasks/paths.js';
import { PACK_SCRATCH_PREFIX } from '../audit/tar-members.js';

export interface RetentionInput {
  store: Store;
  tasksDir: string;
  olderThanDays: number;
  /** Tasks whose run has not settled in this daemon (never deleted, whatever their state). */
  running: () => Set<string>;
  now?: number;
  log: Logger;
}

/** Deletes terminal tasks (row, events, attempts, result, sealed tarball, directory) older than N days. */
export async function runRetention(input: RetentionInput): Promise<{ deleted: string[]; kept: number }> {
  const cutoff = new Date((input.now ?? Date.now()) - input.olderThanDays * 86_400_000).toISOString();
  const deleted: string[] = [];
  let kept = 0;
  for (;;) {
    const batch = (await input.store.listTerminalTasksBefore(cutoff, 200)).filter((t) => !deleted.includes(t.id));
    const running = input.running();
    const candidates = batch.filter((t) => !running.has(t.id));
    kept += batch.length - candidates.length;
    if (candidates.length === 0) break;
    for (const task of candidates) {
      // The row first: a task without a row is garbage; a row without its directory is still a record (the tarball).
      if (await input.store.deleteTerminalTask(task.id)) {
        rmSync(taskPaths(input.tasksDir, task.id).dir, { recursive: true, force: true });
        deleted.push(task.id);
        input.log.info({ taskId: task.id, state: task.state, updatedAt: task.updatedAt }, 'retention: task deleted');
      }
    }
    if (batch.length < 200) break;
  }
  return { deleted, kept };
}

export interface StaleSweepInput {
  store: Store;
  running: () => Set<string>;
  /** Fails the task (the task service's own path: terminal event, sealed tarball). */
  fail: (taskId: string, err: FusionError) => Promise<void>;
  staleAfterMs: number;
  now?: number;
  log: Logger;
}

/**
 * Fails non-terminal tasks that no run of this daemon owns and that have not moved for
 * `staleAfterMs` (e.g. a run that died without settling). Restart recovery handles the rest.
 */
export async function runStaleTaskSweep(input: StaleSweepInput): Promise<{ failed: string[] }> {
  const now = input.now ?? Date.now();
  const running = input.running();
  const failed: string[] = [];
  for (const task of await input.store.listNonTerminalTasks()) {
    if (running.has(task.id)) continue;
    if (now - Date.parse(task.updatedAt) < input.staleAfterMs) continue;
    await input.fail(task.id, new FusionError('supervisor_restarted', `the task was ${task.state} with no run in this daemon for over ${Math.round(input.staleAfterMs / 1000)} s; it was swept as stale. Submit it again.`, { stage: task.state }));
    failed.push(task.id);
    input.log.warn({ taskId: task.id, state: task.state, updatedAt: task.updatedAt }, 'stale-task sweep: task failed');
  }
  return { failed };
}

export interface BackupInput {
  store: Store;
  dir: string;
  keep: number;
  now?: Date;
  log: Logger;
}

export const BACKUP_PREFIX = 'fusion-';
export const BACKUP_SUFFIX = '.db';

/** Online SQLite backup into `dir`, then prunes to the newest `keep` backups. */
export async function runBackup(input: BackupInput): Promise<{ file: string; bytes: number; pruned: string[] }> {
  const stamp = (input.now ?? new Date()).toISOString().replace(/[-:.]/g, '');
  const file = join(input.dir, `${BACKUP_PREFIX}${stamp}${BACKUP_SUFFIX}`);
  const partial = `${file}.partial`;
  rmSync(partial, { force: true });
  try {
    // A backup is the whole database: private like it (0600, never wider whatever the umask or
    // the directory's mode). Created here first, so the copy never exists with wider permissions.
    closeSync(openSync(partial, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600));
    await input.store.backupTo(partial);
    // Only a finished copy gets a backup's name.
    renameSync(partial, file);
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  }
  const names = readdirSync(input.dir).filter((n) => n.startsWith(BACKUP_PREFIX) && n.endsWith(BACKUP_SUFFIX)).sort();
  const pruned = names.slice(0, Math.max(0, names.length - input.keep));
  for (const name of pruned) unlinkSync(join(input.dir, name));
  const bytes = statSync(file).size;
  input.log.info({ file, bytes, pruned: pruned.length, keep: input.keep }, 'backup written');
  return { file, bytes, pruned };
}

export interface ReaperInput {
  /** Removes this daemon's labelled containers whose task is not running; absent without Docker. */
  reapContainers?: (liveTaskIds: Set<string>) => Promise<string[]>;
  running: () => Set<string>;
  /** Where Docker request scratch dirs, staging run roots and pack scratch dirs live. */
  tmpDir: string;
  /** This daemon's own staging run root (never removed). */
  runRoot: string;
  /** Entries untouched for this long are stale (longer than any sandbox may live). */
  staleAfterMs: number;
  /** cgroup roots to search for leftover `fusion-sandboxes` groups. */
  cgroupRoots: readonly string[];
  now?: number;
  log: Logger;
}

export interface ReaperSummary {
  containers: string[];
  dockerScratch: string[];
  stagingRoots: string[];
  packScratch: string[];
  cgroups: string[];
}

/** `<run root>.pid` holds the pid of the live daemon using that run root; the reaper keeps such roots. */
export function runRootPidFile(runRoot: string): string {
  return `${runRoot}.pid`;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function stat(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}

export async function runOrphanReaper(input: ReaperInput): Promise<ReaperSummary> {
  const now = input.now ?? Date.now();
  const uid = process.getuid?.() ?? -1;
  const summary: ReaperSummary = { containers: [], dockerScratch: [], stagingRoots: [], packScratch: [], cgroups: [] };
  if (input.reapContainers !== undefined) {
    try {
      summary.containers = await input.reapContainers(input.running());
    } catch (err) {
      input.log.warn({ err: (err as Error).message }, 'reaper: container listing failed');
    }
  }
  const staleOwned = (path: string): boolean => {
    const st = stat(path);
    return st !== null && st.isDirectory() && !st.isSymbolicLink() && st.uid === uid && now - st.mtimeMs > input.staleAfterMs;
  };
  let names: string[];
  try {
    names = readdirSync(input.tmpDir);
  } catch {
    names = [];
  }
  const myRoot = input.runRoot.split('/').at(-1);
  const myPrefix = `fsn-${uid}-`;
  for (const name of names) {
    const path = join(input.tmpDir, name);
    if (name.startsWith('fusion-docker-') && staleOwned(path)) {
      rmSync(path, { recursive: true, force: true });
      summary.dockerScratch.push(path);
    } else if (name.startsWith(PACK_SCRATCH_PREFIX) && staleOwned(path)) {
      rmSync(path, { recursive: true, force: true });
      summary.packScratch.push(path);
    } else if (name.startsWith(myPrefix) && name !== myRoot && /^fsn-\d+-[0-9a-f]{8}$/.test(name) && staleOwned(path)) {
      // Another data directory's run root: kept while a live daemon owns it.
      let owner = NaN;
      try {
        owner = Number(readFileSync(runRootPidFile(path), 'utf8').trim());
      } catch {
        // no owner file: a root of an older build or a killed daemon
      }
      if (Number.isSafeInteger(owner) && owner > 0 && pidAlive(owner)) continue;
      rmSync(path, { recursive: true, force: true });
      rmSync(runRootPidFile(path), { force: true });
      summary.stagingRoots.push(path);
    }
  }
  for (const root of input.cgroupRoots) summary.cgroups.push(...sweepCgroups(root, now, input.staleAfterMs));
  if (Object.values(summary).some((list) => list.length > 0)) input.log.info({ ...summary }, 'reaper: orphans removed');
  return summary;
}

/** Empty per-sandbox cgroups (and then their empty group) under any `fusion-sandboxes` within 3 levels. */
function sweepCgroups(root: string, now: number, staleGroupMs: number): string[] {
  const removed: string[] = [];
  const visit = (dir: string, depth: number): void => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      const path = join(dir, e.name);
      if (e.name === 'fusion-sandboxes') {
        let children: string[];
        try {
          children = readdirSync(path, { withFileTypes: true }).filter((c) => c.isDirectory()).map((c) => c.name);
        } catch {
          continue;
        }
        for (const child of children) {
          const st = stat(join(path, child));
          if (st === null || now - st.mtimeMs < 60_000) continue;
          try {
            rmdirSync(join(path, child)); // EBUSY while it still holds a process
            removed.push(join(path, child));
          } catch {
            // in use
          }
        }
        // The group itself only when long idle: a launcher may be about to create a child in it.
        const group = stat(path);
        if (group !== null && now - group.mtimeMs > staleGroupMs) {
          try {
            rmdirSync(path);
            removed.push(path);
          } catch {
            // in use by a running sandbox
          }
        }
      } else if (depth < 3) {
        visit(path, depth + 1);
      }
    }
  };
  visit(root, 0);
  return removed;
}
