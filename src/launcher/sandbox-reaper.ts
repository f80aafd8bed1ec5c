/**
 * What a SIGKILLed daemon's sandboxes can leave behind, removed at the next start-up
 * (docs/operations.md#leftovers), once this daemon owns its data directory and before any task
 * of it launches a sandbox:
 *
 * 1. processes running as a uid of the pool that no live sandbox holds (a launch killed half-way,
 *    before bwrap's parent-death signal took hold): SIGKILLed;
 * 2. mounts: anything mounted under this data directory's run root, the host-side /out tmpfs
 *    mounts (`out-mount.ts`) of processes that are gone, and the /tmp mounts earlier versions made
 *    in the temp directory (`fusion-tmp-<pid>-…`) for daemons that are gone: lazily unmounted
 *    (MNT_DETACH: a straggling reader cannot keep one), found in /proc/self/mountinfo rather than
 *    by looking at directory owners (a live mount hides the owner of the directory below it);
 * 3. directories: those mount points, and the per-launch `fusion-binds-*` directories of earlier
 *    versions once older than any sandbox can live;
 * 4. uid claims: every claim whose holder is gone and of which nothing is left (`UidPool.sweep`).
 *
 * Current launches leave no mount, directory or process to reap on bwrap (their mounts live in
 * a private namespace that dies with the sandbox, and every step carries the parent-death
 * signal), so most of this is for Docker's host /out mounts and for hosts upgraded from earlier
 * versions. A root-only job: a non-root daemon mounts nothing and leases no uid.
 */
import { execFile } from 'node:child_process';
import { lstat, readdir, readFile, rm, rmdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from '../log.js';
import { HOST_OUT_BASE } from './out-mount.js';
import { claimHolderAlive, startTime, type UidPool } from './uid-pool.js';

const run = promisify(execFile);
/** Earlier versions' per-launch bind directories are removed once older than any sandbox lives (wall 50 min + margin). */
const LEGACY_BINDS_MAX_AGE_MS = 2 * 60 * 60_000;
const KILL_WAIT_MS = 3_000;

export interface ReapOptions {
  log: Logger;
  /** This data directory's run root: everything mounted below it is a leftover at start-up. */
  runRoot: string;
  pool: UidPool;
  /** Where host-side /out mounts live (default `HOST_OUT_BASE`). */
  hostOutBase?: string;
  /** Where earlier versions left `fusion-tmp-*` mounts and `fusion-binds-*` directories (default the temp dir). */
  legacyDir?: string;
  /** Injected for tests. */
  mountinfo?: () => Promise<string>;
  now?: () => number;
}

export interface ReapReport {
  killed: number[];
  unmounted: string[];
  removedDirs: string[];
  releasedClaims: number[];
}

/** `\040` and friends: mountinfo escapes spaces, tabs, newlines and backslashes in paths. */
function unescapeMountPath(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** Mount points of this mount namespace, deepest first (children before their parents). */
export function mountPoints(mountinfo: string): string[] {
  const points = mountinfo.split('\n').map((line) => line.split(' ')[4]).filter((p): p is string => p !== undefined && p !== '').map(unescapeMountPath);
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

function alive(pid: number, started?: string): boolean {
  const now = startTime(pid);
  return now !== null && (started === undefined || now === started);
}

function under(path: string, root: string): boolean {
  return path === root || path.startsWith(`${root}/`);
}

/**
 * Host pids with a real, effective, saved or filesystem uid or gid of the pool whose claim has no
 * live holder. The claim is read when the process is judged: a claim is always made before its
 * sandbox starts, and a daemon that released a claim may still be ending that sandbox, so no
 * process of another live daemon is ever taken for a stray. Zombies are skipped: they cannot run
 * or be signalled, and they go when their parent (or init) reaps them.
 */
async function strayPids(pool: UidPool): Promise<number[]> {
  const { range, claimDir } = pool;
  const found: number[] = [];
  for (const name of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(name)) continue;
    const status = await readFile(`/proc/${name}/status`, 'utf8').catch(() => null);
    if (status === null || /^State:\s+Z/m.test(status)) continue;
    let stray = false;
    for (const match of status.matchAll(/^(?:Uid|Gid):\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/gm)) {
      for (let i = 1; i <= 4; i++) {
        const id = Number(match[i]);
        if (id >= range.start && id <= range.end && !claimHolderAlive(claimDir, id)) stray = true;
      }
    }
    if (stray) found.push(Number(name));
  }
  return found;
}

export async function reapSandboxLeftovers(options: ReapOptions): Promise<ReapReport> {
  const report: ReapReport = { killed: [], unmounted: [], removedDirs: [], releasedClaims: [] };
  if (process.getuid?.() !== 0) return report;
  const log = options.log.child({ component: 'sandbox-reaper' });
  const hostOutBase = options.hostOutBase ?? HOST_OUT_BASE;
  const legacyDir = options.legacyDir ?? tmpdir();
  const now = options.now ?? Date.now;
  const readMountinfo = options.mountinfo ?? (() => readFile('/proc/self/mountinfo', 'utf8'));

  // 1. Processes of the pool whose claim has no live holder. A claim is made before its sandbox
  // starts and stays while its daemon lives, so a pool uid without one has nothing to run.
  const strays = await strayPids(options.pool);
  for (const pid of strays) {
    try {
      process.kill(pid, 'SIGKILL');
      report.killed.push(pid);
    } catch {
      // gone already
    }
  }
  if (report.killed.length > 0) {
    const deadline = now() + KILL_WAIT_MS;
    while (now() < deadline && (await strayPids(options.pool)).length > 0) await new Promise((r) => setTimeout(r, 50));
  }

  // 2. Mounts, deepest first.
  const points = mountPoints(await readMountinfo().catch(() => ''));
  const leftover = async (point: string): Promise<boolean> => {
    if (under(point, options.runRoot) && point !== options.runRoot) return true;
    if (point.startsWith(`${hostOutBase}/`)) {
      const owner = /^(\d+)\.(\d+)\./.exec(point.slice(hostOutBase.length + 1));
      return owner !== null && !alive(Number(owner[1]), owner[2]);
    }
    if (point.startsWith(`${legacyDir}/fusion-tmp-`)) {
      const pid = /^fusion-tmp-(\d+)-/.exec(point.slice(legacyDir.length + 1))?.[1];
      if (pid === undefined || alive(Number(pid))) return false;
      // A mount point only root could have made; its owner is the mount's, not the directory's
      // below it, so ownership proves nothing here. In a world-writable directory the name must
      // still be a real directory (never a link someone planted: umount(8) would follow it).
      const info = await lstat(point).catch(() => null);
      return info !== null && info.isDirectory();
    }
    return false;
  };
  for (const point of points) {
    if (!(await leftover(point))) continue;
    try {
      await run('/usr/bin/umount', ['-l', '--', point]);
      report.unmounted.push(point);
    } catch (err) {
      log.warn({ mountPoint: point, reason: (err as Error).message }, 'leftover sandbox mount could not be unmounted');
      continue;
    }
    if (!under(point, options.runRoot)) {
      await rmdir(point).then(() => report.removedDirs.push(point), () => undefined);
    }
  }

  // 3. Directories: host /out mount points of dead processes that were not mounted any more,
  // and earlier versions' bind directories once no sandbox can still use them.
  for (const name of await readdir(hostOutBase).catch(() => [] as string[])) {
    const owner = /^(\d+)\.(\d+)\./.exec(name);
    if (owner === null || alive(Number(owner[1]), owner[2])) continue;
    const dir = join(hostOutBase, name);
    await rmdir(dir).then(() => report.removedDirs.push(dir), () => undefined);
  }
  const mounted = new Set(points.filter((p) => !report.unmounted.includes(p)));
  for (const name of await readdir(legacyDir).catch(() => [] as string[])) {
    const dir = join(legacyDir, name);
    const pid = /^fusion-tmp-(\d+)-/.exec(name)?.[1];
    if (pid !== undefined && !alive(Number(pid)) && !mounted.has(dir)) {
      // An empty mount point whose mount is gone (rmdir never removes anything else).
      const info = await lstat(dir).catch(() => null);
      if (info?.isDirectory() && info.uid === 0) await rmdir(dir).then(() => report.removedDirs.push(dir), () => undefined);
      continue;
    }
    if (!name.startsWith('fusion-binds-')) continue;
    const info = await lstat(dir).catch(() => null);
    if (info === null || !info.isDirectory() || info.uid !== 0 || mounted.has(dir) || now() - info.mtimeMs < LEGACY_BINDS_MAX_AGE_MS) continue;
    await rm(dir, { recursive: true, force: true }).then(() => report.removedDirs.push(dir), () => undefined);
  }

  // 4. Claims whose holder is gone and of which nothing is left (its processes were just killed).
  report.releasedClaims = (await options.pool.sweep()).released;
  if (report.killed.length + report.unmounted.length + report.removedDirs.length + report.releasedClaims.length > 0) {
    log.warn({ killed: report.killed, unmounted: report.unmounted, removedDirs: report.removedDirs, releasedClaims: report.releasedClaims.length },
      'leftovers of a stopped daemon\'s sandboxes removed');
  }
  return report;
}
