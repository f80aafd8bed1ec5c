/**
 * Shared set-up for the suites that run against every sandbox backend (containment) and for the
 * Docker launcher's own suite: which backends are usable here and building each `Launcher` the
 * way the daemon does. Scratch directories, the log capture and `run()` come from test/e2e/shared/.
 *
 * Availability: a backend that is not usable skips loudly on a developer machine, and FAILS in
 * CI (`CI=true`), so the containment proof can never silently disappear there.
 */
import { existsSync } from 'node:fs';
import { describe, it } from 'vitest';
import { createLogger, type Logger } from '../../../src/log.js';
import type { Launcher, LauncherName } from '../../../src/launcher/port.js';
import { createBwrapLauncher } from '../../../src/launcher/bwrap.js';
import { createDockerLauncher, type DockerLauncher } from '../../../src/launcher/docker.js';
import { createGvisorLauncher } from '../../../src/launcher/gvisor.js';

export { captureLogs, type LogCapture } from '../shared/logs.js';
export { freshOutDir, IS_ROOT, limits, makeScratch, PROBES_DIR, probe, report, run, type RunResult, type RunSpec, type Scratch } from '../shared/sandbox.js';

export const IN_CI = process.env.CI === 'true';
export const BACKENDS: LauncherName[] = ['bwrap', 'docker', 'gvisor'];
/** Separates these tests' containers from a daemon's on the same engine (orphan reaping). */
export const TEST_OWNER = 'fusion-e2e';

/** Builds a backend's launcher exactly as the daemon does (src/main.ts factories). */
export function createLauncher(name: LauncherName, log: Logger): Launcher {
  if (name === 'bwrap') return createBwrapLauncher({ log });
  if (name === 'gvisor') return createGvisorLauncher({ log, owner: TEST_OWNER });
  return createDockerLauncher({ log, owner: TEST_OWNER });
}

export function createTestDockerLauncher(log: Logger, extra: { image?: string; socketPath?: string; owner?: string } = {}): DockerLauncher {
  return createDockerLauncher({ log, owner: TEST_OWNER, ...extra });
}

/** Whether each backend is usable here, with the reason when not (asked once per test file). */
export async function backendAvailability(): Promise<Record<LauncherName, { ok: boolean; reason?: string }>> {
  const quiet = createLogger({ level: 'silent' });
  const bwrap = existsSync('/usr/bin/bwrap')
    ? await createBwrapLauncher({ log: quiet }).check()
    : { ok: false, reason: '/usr/bin/bwrap is missing (apt-get install bubblewrap)' };
  const docker = await createDockerLauncher({ log: quiet }).check();
  const gvisor = await createGvisorLauncher({ log: quiet }).check();
  return { bwrap, docker, gvisor };
}

/**
 * `describe` that runs when the backend is usable, skips with a warning locally, and fails in CI.
 */
export function describeBackend(name: string, status: { ok: boolean; reason?: string }, body: () => void): void {
  if (status.ok) {
    describe(name, body);
    return;
  }
  const why = `${name}: backend not usable here: ${status.reason ?? 'unknown reason'}`;
  if (IN_CI) {
    describe(name, () => {
      it('is usable in CI (never skipped there)', () => {
        throw new Error(why);
      });
    });
    return;
  }
  console.warn(`\n!!! SKIPPING "${name}": ${why}\n`);
  describe.skip(name, body);
}
