/**
 * The gVisor tier (`--sandbox gvisor`): the Docker launcher with the `runsc` OCI runtime. Same
 * container configuration, image, seccomp profile (applied inside the sandbox: the runtime is
 * registered with `--oci-seccomp`), caps and binds as `docker`; the child's syscalls are served
 * by gVisor's user-space kernel (the Sentry) instead of the host kernel, so a kernel bug reachable
 * from the child is no longer a host bug. Set-up (`scripts/setup-gvisor.sh`) installs Debian's
 * runsc and registers it as the engine's `runsc` runtime with `--platform=ptrace` (works without
 * KVM) and `--network=none` (the Sentry's own netstack has only loopback).
 *
 * Cost: a slower start (the Sentry boots per container) and slower syscalls; `make bench`
 * records the start-up of each tier (bench/sandbox-tiers.bench.mjs).
 */
import { createDockerLauncher, type DockerLauncher, type DockerLauncherOptions } from './docker.js';
import type { LauncherCheck } from './port.js';

export const GVISOR_RUNTIME = 'runsc';
/**
 * The Sentry and gofer run in the container's pids cgroup, with host threads of their own (and
 * the ptrace platform's stubs): at the child's own cap they fail to start threads and the whole
 * sandbox dies. So the cgroup gets this headroom (still a hard bound on the host), and the
 * child's process cap is RLIMIT_NPROC, which the Sentry enforces on the sandbox's tasks.
 */
const SENTRY_PIDS = 384;
const SETUP_HINT = 'install and register it as root: apt-get install runsc && bash scripts/setup-gvisor.sh (make system-deps does both)';

/**
 * The policy's profile without its `clone3` rule. The rule answers ENOSYS so that libc falls back
 * to clone(), whose namespace flags the profile can inspect; runsc 20221219 does not implement
 * clone3 at all (it answers ENOSYS itself), but a filter-made ENOSYS there breaks glibc's thread
 * creation (Node aborts at start). Every other rule stays.
 */
export function gvisorSeccompOpt(policyOpt: string): string {
  const at = policyOpt.indexOf('=');
  const profile = JSON.parse(policyOpt.slice(at + 1)) as { syscalls: Array<{ names: string[] }> };
  profile.syscalls = profile.syscalls.filter((rule) => !rule.names.includes('clone3'));
  return `${policyOpt.slice(0, at + 1)}${JSON.stringify(profile)}`;
}

export function createGvisorLauncher(options: Omit<DockerLauncherOptions, 'runtime' | 'name' | 'seccompOpt'>): DockerLauncher {
  const inner = createDockerLauncher({ ...options, runtime: GVISOR_RUNTIME, name: 'gvisor', seccompOpt: gvisorSeccompOpt, pidsHeadroom: SENTRY_PIDS });
  async function check(): Promise<LauncherCheck> {
    const engine = await inner.check();
    if (!engine.ok) return engine;
    try {
      if (!(await inner.runtimes()).includes(GVISOR_RUNTIME)) return { ok: false, reason: `the Docker engine has no ${GVISOR_RUNTIME} runtime; ${SETUP_HINT}` };
    } catch (err) {
      return { ok: false, reason: `cannot ask the Docker engine for its runtimes: ${(err as Error).message}` };
    }
    return engine;
  }
  return { ...inner, check };
}
