/**
 * The maintenance jobs themselves (scheduled by scheduler.ts). Each returns a summary that the
 * scheduler logs; none of them ever touches a task this daemon is running.
 */
import { assertPrivateBackupDir } from './backup-dir.js';
import {
  chmodSync, closeSync, constants, copyFileSync, linkSync, lstatSync, mkdirSync, openSync, readdirSync, rmSync, rmdirSync, statSync, readFileSync, renameSync, writeFileSync, type Stats,
} from 'node:fs';
import { join } from 'node:path';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Store } from '../store/port.js';
import { taskPaths } from '../tasks/paths.js';
import { PACK_SCRATCH_PREFIX } from '../audit/tar-members.js';
import { loadSigningKey, SIGNING_KEY_FILE, SIGNING_PUBLIC_KEY_FILE } from '../audit/signing.js';
import { loadUnsignedBeforeKey, UNSIGNED_BEFORE_KEY_FILE } from '../audit/unsigned-before-key.js';

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

export type BackupSigningKey = 'private' | 'public';

export interface BackupInput {
  store: Store;
  dir: string;
  keep: number;
  now?: Date;
  log: Logger;
  /** The data directory: its signing key is saved with the database. */
  home?: string;
  /** The data directory's task folders (answers, attempt tarballs) are saved as well. */
  tasksDir?: string;
  /** Tasks whose run has not settled in this daemon: their folders are still changing and are skipped. */
  running?: () => Set<string>;
  /** The research database when it is its own file (--research-db); absent when it is the main one. */
  research?: { backupTo(file: string): Promise<void> };
  /** Which half of the signing key to save (FUSION_BACKUP_SIGNING_KEY, default private). */
  signingKey?: BackupSigningKey;
}

export const BACKUP_PREFIX = 'fusion-';
/** Backups before the directory format were a bare database file (still rotated). */
export const BACKUP_SUFFIX = '.db';
export const BACKUP_DB_FILE = 'fusion.db';
export const BACKUP_RESEARCH_DB_FILE = 'research.db';
export const BACKUP_MANIFEST_FILE = 'backup.json';
const PARTIAL = '.partial';

/** A private file created exclusively (0600 whatever the umask) and filled by `fill`. */
async function privateFile(file: string, fill: (file: string) => Promise<void> | void): Promise<void> {
  closeSync(openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600));
  await fill(file);
}

/**
 * Copies the task folders below `from` into `to`: directories 0700, regular files hard-linked
 * when the backup is on the same file system (a finished task's files are never rewritten, only
 * deleted by retention, so a link is a copy that costs nothing), copied otherwise. Symlinks and
 * special files are never followed or copied (a task folder holds none the daemon wrote).
 */
function copyTaskTree(from: string, to: string, skip: Set<string>): number {
  mkdirSync(to, { mode: 0o700 });
  let tasks = 0;
  const visit = (src: string, dst: string): void => {
    let entries;
    try {
      entries = readdirSync(src, { withFileTypes: true });
    } catch {
      return; // removed by retention meanwhile
    }
    for (const e of entries) {
      const s = join(src, e.name);
      const d = join(dst, e.name);
      if (e.isDirectory()) {
        mkdirSync(d, { mode: 0o700 });
        visit(s, d);
      } else if (e.isFile()) {
        try {
          linkSync(s, d);
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (code === 'ENOENT') continue;
          if (code !== 'EXDEV' && code !== 'EPERM' && code !== 'EMLINK') throw err;
          copyFileSync(s, d, constants.COPYFILE_EXCL);
          chmodSync(d, 0o600);
        }
      }
    }
  };
  for (const e of readdirSync(from, { withFileTypes: true })) {
    if (!e.isDirectory() || skip.has(e.name)) continue;
    mkdirSync(join(to, e.name), { mode: 0o700 });
    visit(join(from, e.name), join(to, e.name));
    tasks += 1;
  }
  return tasks;
}

export interface BackupSummary {
  /** The backup directory. */
  dir: string;
  /** Its copy of the main database. */
  file: string;
  bytes: number;
  research: boolean;
  signingKey: BackupSigningKey | 'none';
  tasks: number;
  pruned: string[];
}

/**
 * One restorable backup: `dir/fusion-<UTC time>/` holding the main database (SQLite online
 * backup), the research database when it is its own file, the signing key, the task folders
 * and `backup.json` saying what is there. Written under `.partial` and renamed when complete;
 * then the newest `keep` backups are kept. Restore steps: docs/operations.md#restore.
 */
export async function runBackup(input: BackupInput): Promise<BackupSummary> {
  const stamp = (input.now ?? new Date()).toISOString().replace(/[-:.]/g, '');
  const target = join(input.dir, `${BACKUP_PREFIX}${stamp}`);
  const partial = `${target}${PARTIAL}`;
  mkdirSync(input.dir, { recursive: true, mode: 0o700 });
  assertPrivateBackupDir(input.dir);
  // Leftovers of a backup that died half-way are never mistaken for a backup: remove them.
  for (const name of readdirSync(input.dir)) {
    if (name.startsWith(BACKUP_PREFIX) && name.endsWith(PARTIAL)) rmSync(join(input.dir, name), { recursive: true, force: true });
  }
  let summary: Omit<BackupSummary, 'pruned' | 'dir' | 'file' | 'bytes'>;
  try {
    // A backup holds every answer and the signing key: private like the data directory (0700,
    // its files 0600), whatever the umask or the backup directory's mode.
    mkdirSync(partial, { mode: 0o700 });
    chmodSync(partial, 0o700);
    await privateFile(join(partial, BACKUP_DB_FILE), (f) => input.store.backupTo(f));
    if (input.research) await privateFile(join(partial, BACKUP_RESEARCH_DB_FILE), (f) => input.research!.backupTo(f));
    let signingKey: BackupSigningKey | 'none' = 'none';
    if (input.home !== undefined) {
      // Loaded with the daemon's own checks: a key the daemon would refuse is not copied either.
      const key = loadSigningKey(input.home);
      if (key !== null) {
        writeFileSync(join(partial, SIGNING_PUBLIC_KEY_FILE), key.publicKeyPem, { mode: 0o644, flag: 'wx' });
        signingKey = 'public';
        // The key's list of tasks sealed unsigned before it: without it a restore would refuse them.
        const unsignedBefore = loadUnsignedBeforeKey(input.home, key.publicKey);
        if (unsignedBefore !== null) writeFileSync(join(partial, UNSIGNED_BEFORE_KEY_FILE), readFileSync(unsignedBefore.file), { mode: 0o644, flag: 'wx' });
        if ((input.signingKey ?? 'private') === 'private') {
          const pem = key.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
          await privateFile(join(partial, SIGNING_KEY_FILE), (f) => writeFileSync(f, pem));
          signingKey = 'private';
        }
      }
    }
    const tasks = input.tasksDir !== undefined ? copyTaskTree(input.tasksDir, join(partial, 'tasks'), input.running?.() ?? new Set()) : 0;
    summary = { research: input.research !== undefined, signingKey, tasks };
    writeFileSync(join(partial, BACKUP_MANIFEST_FILE), `${JSON.stringify({ format: 1, createdAt: (input.now ?? new Date()).toISOString(), database: BACKUP_DB_FILE, researchDatabase: summary.research ? BACKUP_RESEARCH_DB_FILE : null, signingKey, tasks }, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
    // Only a finished backup gets a backup's name.
    renameSync(partial, target);
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    throw err;
  }
  const stampOf = (name: string): string => name.slice(BACKUP_PREFIX.length).replace(BACKUP_SUFFIX, '');
  const names = readdirSync(input.dir)
    .filter((n) => n.startsWith(BACKUP_PREFIX) && !n.endsWith(PARTIAL) && /^\d{8}T\d{9}Z$/.test(stampOf(n)))
    .sort((a, b) => stampOf(a).localeCompare(stampOf(b)));
  const pruned = names.slice(0, Math.max(0, names.length - input.keep));
  for (const name of pruned) rmSync(join(input.dir, name), { recursive: true, force: true });
  const file = join(target, BACKUP_DB_FILE);
  const bytes = statSync(file).size;
  input.log.info({ dir: target, bytes, ...summary, pruned: pruned.length, keep: input.keep }, 'backup written');
  return { dir: target, file, bytes, ...summary, pruned };
}

export interface ReaperInput {
  /** Removes this daemon's labelled containers whose task is not running; absent without Docker. */
  reapContainers?: (liveTaskIds: Set<string>) => Promise<string[]>;
  running: () => Set<string>;
  /** Where Docker request scratch dirs, pack scratch dirs and older builds' staging run roots live. */
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

/**
 * Builds before the run root moved out of $TMPDIR (docs/operations.md#run-root) staged in
 * `$TMPDIR/fsn-<uid>-<8 hex>`, with `<run root>.pid` naming the live daemon using it: the reaper
 * removes such roots of other data directories once stale and ownerless.
 */
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

/**
 * Empty per-sandbox cgroups (and then their empty group) under any `fusion-sandboxes` within 3
 * levels. Host-wide on purpose: the tree is shared by every daemon of the host and an empty cgroup
 * older than a minute is a leftover whoever made it (a crashed daemon's); a cgroup in use refuses
 * rmdir. So the summary's `cgroups` may name other daemons' leftovers (docs/operations.md#maintenance).
 */
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
