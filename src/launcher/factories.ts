/**
 * How launchers are built, for the daemon (src/main.ts) and `fusion sandbox exec` alike, so the
 * two can never disagree about the policy. Composition code: the one place that knows every
 * backend; the backends themselves never import each other.
 */
import type { Logger } from '../log.js';
import { createBwrapLauncher } from './bwrap.js';
import { createDockerLauncher } from './docker.js';
import { createGvisorLauncher } from './gvisor.js';
import type { UidPool } from './uid-pool.js';
import type { LauncherFactories } from './select.js';

export interface LauncherFactoryOptions {
  log: Logger;
  /** Where a root daemon leases each sandbox's uid (config sandboxUids); default the process-wide pool. */
  uidPool?: UidPool;
  /** Docker engine socket (default /var/run/docker.sock). */
  dockerSocketPath?: string;
  /** Label separating this process's containers from other daemons' (orphan reaping). */
  dockerOwner?: string;
  /** bwrap: accept the weak rlimit mode when no cgroup is usable (config sandboxRlimitFallback). */
  allowRlimitFallback?: boolean;
}

/** The launcher factories of the daemon and of `fusion sandbox exec`: one construction for both. */
export function createLauncherFactories(options: LauncherFactoryOptions): LauncherFactories {
  const ids = options.uidPool === undefined ? {} : { uidPool: options.uidPool };
  const engine = {
    log: options.log,
    ...ids,
    ...(options.dockerSocketPath === undefined ? {} : { socketPath: options.dockerSocketPath }),
    ...(options.dockerOwner === undefined ? {} : { owner: options.dockerOwner }),
  };
  return {
    bwrap: () => createBwrapLauncher({ log: options.log, ...ids, ...(options.allowRlimitFallback === undefined ? {} : { allowRlimitFallback: options.allowRlimitFallback }) }),
    docker: () => createDockerLauncher(engine),
    gvisor: () => createGvisorLauncher(engine),
  };
}

