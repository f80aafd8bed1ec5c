/**
 * What cgroup v1 and v2 sandbox cgroups share: the `fusion-sandboxes` group directories that
 * hold them (created on demand, swept of crashed daemons' leftovers, released when empty) and
 * removing a cgroup directory once the kernel has reaped its last task.
 */
import { mkdir, readdir, rmdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface CgroupStats {
  /** Processes the kernel OOM killer killed in this cgroup. */
  oomKills: number;
  /** Times a fork/clone was refused by `pids.max`. */
  pidsLimitHits: number;
  memoryPeakBytes: number | null;
}

export interface SandboxCgroup {
  readonly dirs: readonly string[];
  /** Moves a (host) pid into the cgroup. */
  addProcess(pid: number): Promise<void>;
  /** Host pids currently in the cgroup. */
  pids(): Promise<number[]>;
  stats(): Promise<CgroupStats>;
  /** Kills what is left and removes the cgroup directories. */
  destroy(): Promise<void>;
}

export interface ProcessCaps {
  memoryBytes: number;
  maxProcesses: number;
}

const SWEEP_AGE_MS = 60_000;
export const GROUP_DIR = 'fusion-sandboxes';

export function errnoOf(err: unknown): string {
  return (err as NodeJS.ErrnoException | null)?.code ?? 'unknown';
}

export async function killAll(pids: number[]): Promise<void> {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/** rmdir with retries: a cgroup stays busy until the kernel has reaped its last task. */
export async function removeCgroupDir(dir: string, listPids: () => Promise<number[]>): Promise<void> {
  // The last tasks are usually gone within a few ms of bwrap's exit: back off from 1 ms to 50 ms
  // (about 5 s in all) instead of sleeping a fixed slice on every exit.
  for (let attempt = 0, delayMs = 1; attempt < 110; attempt += 1, delayMs = Math.min(delayMs * 2, 50)) {
    try {
      await rmdir(dir);
      return;
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return;
      if (errnoOf(err) !== 'EBUSY') throw err;
    }
    await killAll(await listPids());
    await new Promise((resolve) => setTimeout(resolve, delayMs));
  }
  throw new Error(`cgroup ${dir} is still busy`);
}

/** Removes empty per-sandbox cgroups older than a minute that a crashed daemon left behind. */
async function sweepStale(groupDir: string): Promise<void> {
  let names: string[];
  try {
    names = await readdir(groupDir);
  } catch {
    return;
  }
  const now = Date.now();
  for (const name of names) {
    const dir = join(groupDir, name);
    try {
      const info = await stat(dir);
      if (info.isDirectory() && now - info.mtimeMs > SWEEP_AGE_MS) await rmdir(dir);
    } catch {
      // busy (still running) or not ours: leave it
    }
  }
}

/**
 * The `fusion-sandboxes` directories holding the per-sandbox cgroups. They exist only while a
 * sandbox does: the last one out removes them, so the daemon leaves nothing in a parent cgroup
 * that its owner (systemd, a container runtime) may want to remove.
 */
export class GroupDirs {
  private lastSweepMs = 0;

  constructor(readonly dirs: readonly string[], private readonly enableControllers: boolean) {}

  private async ensure(): Promise<void> {
    for (const dir of this.dirs) {
      await mkdir(dir, { recursive: true });
      if (this.enableControllers) await writeFile(join(dir, 'cgroup.subtree_control'), '+memory +pids');
    }
  }

  /** Proves that cgroups can be created here (an existing directory proves nothing). */
  async probe(): Promise<void> {
    await this.ensure();
    for (const dir of this.dirs) {
      const probe = join(dir, `probe-${process.pid}-${Date.now()}`);
      await mkdir(probe);
      await rmdir(probe);
    }
    await this.sweep();
  }

  /** Removes leftovers of crashed daemons at most once a minute, then the group if empty. */
  async sweep(): Promise<void> {
    if (Date.now() - this.lastSweepMs < SWEEP_AGE_MS) return;
    this.lastSweepMs = Date.now();
    for (const dir of this.dirs) await sweepStale(dir);
    await this.releaseIfEmpty();
  }

  async releaseIfEmpty(): Promise<void> {
    for (const dir of this.dirs) await rmdir(dir).catch(() => undefined); // EBUSY while in use
  }

  /** Runs `make` with the group present; retries when a concurrent release removed it. */
  async create<T>(make: () => Promise<T>): Promise<T> {
    await this.sweep();
    // Another daemon (or the maintenance reaper) may remove an empty group at any moment, also
    // between ensure()'s mkdir and its subtree_control write: both steps retry on ENOENT.
    for (let attempt = 0; ; attempt += 1) {
      try {
        await this.ensure();
        return await make();
      } catch (err) {
        if (errnoOf(err) !== 'ENOENT' || attempt >= 10) throw err;
      }
    }
  }
}
