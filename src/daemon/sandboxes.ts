/**
 * The sandbox side of the daemon: the uid pool, the launchers (probed on first use, a failed
 * probe not cached), and the reaping of what a killed predecessor's sandboxes left.
 */
import { existsSync } from 'node:fs';
import type { Logger } from '../log.js';
import type { DaemonConfig } from '../contracts/config.js';
import { sha256Hex } from '../contracts/sha256.js';
import { createDockerLauncher } from '../launcher/docker.js';
import { createDaemonUidPool } from '../launcher/daemon-uid-pool.js';
import { createLauncherFactories } from '../launcher/factories.js';
import { selectLauncher, type LauncherFactories } from '../launcher/select.js';
import type { Launcher, LauncherName } from '../launcher/port.js';
import { reapSandboxLeftovers } from '../launcher/sandbox-reaper.js';
import { instrumentLauncher } from '../instrument.js';
import type { DaemonOverrides } from './types.js';

export interface Sandboxes {
  uidPool: ReturnType<typeof createDaemonUidPool>;
  /** What "a sandbox uid" may read, for the host-side checks (null when not root). */
  sandboxOwner: { uid: number; gid: number } | null;
  /** Containers of this daemon carry this owner label. */
  dockerOwner: string;
  launcherFor(choice: 'auto' | LauncherName): Promise<Launcher>;
}

export function createSandboxes(config: DaemonConfig, overrides: Pick<DaemonOverrides, 'launcherFactories'>, log: Logger): Sandboxes {
  const isRoot = process.getuid?.() === 0;
  // One uid per sandbox from the configured range (root only: changing uid needs privileges).
  const uidPool = createDaemonUidPool(config.sandboxUids, isRoot, log);
  // What "a sandbox uid" may read, for the host-side checks that must not see more than a
  // sandbox could (any uid of the range stands for all of them: none owns anything).
  const sandboxOwner = isRoot ? { uid: uidPool.range.start, gid: uidPool.range.start } : null;
  // Containers of this daemon carry an owner label derived from its home, so start-up reaping
  // removes only this daemon's orphans (never another daemon's or `sandbox exec`'s).
  const dockerOwner = `daemon-${sha256Hex(config.home).slice(0, 12)}`;
  const factories: LauncherFactories =
    overrides.launcherFactories ?? createLauncherFactories({ log, uidPool, dockerOwner, allowRlimitFallback: config.sandboxRlimitFallback });
  const launchers = new Map<string, Promise<Launcher>>();
  const launcherFor = (choice: 'auto' | LauncherName): Promise<Launcher> => {
    const key = choice === 'auto' ? config.sandbox : choice;
    let p = launchers.get(key);
    if (!p) {
      p = selectLauncher(key, factories).then(instrumentLauncher);
      // A failed probe is not cached: the admin may install the backend and retry.
      p.catch(() => launchers.delete(key));
      launchers.set(key, p);
    }
    return p;
  };
  return { uidPool, sandboxOwner, dockerOwner, launcherFor };
}

/**
 * No container of this daemon can be live before recovery: reaps them before resumed tasks
 * launch new ones, whatever the backend now (a daemon restarted with bwrap still owns the
 * containers its killed predecessor left). Returns the Docker launcher used, for the periodic
 * reaper (absent without a Docker socket, or with test launchers).
 */
export async function reapLeftovers(sandboxes: Sandboxes, runRoot: string, overrides: Pick<DaemonOverrides, 'launcherFactories'>, log: Logger): Promise<ReturnType<typeof createDockerLauncher> | undefined> {
  const docker = !overrides.launcherFactories && existsSync('/var/run/docker.sock')
    ? createDockerLauncher({ log, uidPool: sandboxes.uidPool, owner: sandboxes.dockerOwner })
    : undefined;
  if (docker !== undefined) {
    await docker.reapOrphans(new Set()).catch((err: unknown) => log.warn({ reason: (err as Error).message }, 'orphan container reaping failed'));
  }
  // Then what a killed predecessor's sandboxes left: stray processes of the uid pool, mounts,
  // mount points, and the uid claims nothing holds any more (src/launcher/sandbox-reaper.ts).
  await reapSandboxLeftovers({ log, runRoot, pool: sandboxes.uidPool }).catch((err: unknown) => log.warn({ reason: (err as Error).message }, 'sandbox leftover reaping failed'));
  return docker;
}
