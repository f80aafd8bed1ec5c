/**
 * The data directory a daemon owns: created 0700 and checked, then locked (one owner per data
 * directory), with a fresh per-attempt run root. Both are given back by the lifecycle.
 */
import { chmodSync, mkdirSync, rmSync, statSync } from 'node:fs';
import type { Logger } from '../log.js';
import { FusionError } from '../errors.js';
import type { DaemonConfig } from '../contracts/config.js';
import { assertDataDirOwned } from '../store/data-dir-owner.js';
import { takeDataDirLock } from '../store/data-dir-lock.js';
import { claimRunRoot, prepareRunRoot } from '../launcher/attempt-dirs.js';
import type { Lifecycle } from './lifecycle.js';

/** Creates the data directory 0700 (and tightens an existing one that is group/world accessible). */
export function prepareHome(home: string, log: Logger): void {
  try {
    mkdirSync(home, { recursive: true, mode: 0o700 });
    if (!statSync(home).isDirectory()) throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' });
  } catch (err) {
    // Name the path and the problem (a file given as --data, no permission, a read-only disk).
    const code = (err as NodeJS.ErrnoException).code;
    const problem = code === 'EEXIST' || code === 'ENOTDIR' ? 'exists and is not a directory (or a parent is a file)' : code === 'EACCES' || code === 'EPERM' ? 'cannot be created or opened: permission denied' : code === 'EROFS' ? 'is on a read-only filesystem' : `cannot be created (${code ?? (err as Error).message})`;
    throw new FusionError('invalid_config', `data directory ${home} ${problem}; choose another with --data or FUSION_HOME`, { details: { field: 'data', path: home } });
  }
  // Before it is tightened (chmod follows links) or anything in it is opened.
  assertDataDirOwned(home, process.getuid?.() ?? 0);
  const mode = statSync(home).mode & 0o777;
  if (mode !== 0o700) {
    log.warn({ home, mode: mode.toString(8) }, 'data directory was not 0700; tightening it');
    chmodSync(home, 0o700);
  }
}

/**
 * Takes the data directory: its lock, then the run root. Returns the run root's path.
 * `runRootOverride` is a test seam (a run root outside the data directory).
 */
export async function ownDataDir(config: DaemonConfig, life: Lifecycle, runRootOverride: string | undefined): Promise<string> {
  // One owner per data directory, taken before anything it owns is looked at: a second daemon
  // would otherwise reap the first one's containers and recover its running tasks as orphans.
  const lock = await takeDataDirLock(config.home, { socket: config.socketPath });
  // Last on shutdown: nothing of this run is left in the run root, and the data directory is free.
  life.defer('releasing the data directory', () => lock.release());
  // Per-attempt staging (docs/security.md#threat-local-users): fresh at each start; what dead
  // runs of this data directory left is removed now that no live daemon can be using it.
  if (runRootOverride !== undefined) {
    prepareRunRoot(runRootOverride);
    life.defer('removing the run root', () => rmSync(runRootOverride, { recursive: true, force: true }));
    return runRootOverride;
  }
  const runRoot = claimRunRoot(config.home);
  life.defer('removing the run root', () => runRoot.remove());
  return runRoot.path;
}
