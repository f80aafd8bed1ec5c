/**
 * Deadlines that do not depend on the daemon (docs/security.md#isolation-tiers): the process that
 * launched a sandbox is SIGKILLed while a child runs forever; the child must be gone within its
 * wall limit plus a small slack, on every backend.
 * - bwrap: `--die-with-parent` — the sandbox dies with its launcher at once.
 * - docker: the engine keeps the container; the deadline keeper (a detached process beside the
 *   daemon) removes it once wall + grace + slack have passed.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import Docker from 'dockerode';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { backendAvailability, BACKENDS, describeBackend, freshOutDir, makeScratch, PROBES_DIR, type Scratch } from './helpers.js';
import { waitFor } from '../../helpers/wait.js';

const availability = await backendAvailability();
const FIXTURE = join(import.meta.dirname, '../../fixtures/e2e/launch-and-hang.mjs');
const WALL_MS = 3_000;
/** wall + grace (1 s) + keeper slack (2 s) + engine removal and polling. */
const GONE_WITHIN_MS = WALL_MS + 1_000 + 2_000 + 8_000;

/** Host pids whose command line holds `token` (the sandboxed probe carries it as an argument). */
async function pidsWith(token: string): Promise<number[]> {
  const found: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const cmdline = await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.split('\0').includes(token)) found.push(Number(name));
  }
  return found;
}

/** How long `check` took to hold (polled every 100 ms), or a failure after `withinMs`. */
async function timeUntil(what: string, check: () => Promise<boolean>, withinMs: number): Promise<number> {
  const start = performance.now();
  await waitFor(what, check, withinMs, 100);
  return performance.now() - start;
}

for (const backend of BACKENDS) {
  describeBackend(`daemon death [${backend}]`, availability[backend], () => {
    let scratch: Scratch;
    beforeAll(async () => {
      scratch = await makeScratch(`fusion-death-${backend}-`);
    });
    afterAll(async () => {
      await scratch.cleanup();
    });

    it('a child does not outlive a SIGKILLed daemon by more than its wall limit', async () => {
      const token = `death-${randomUUID().slice(0, 8)}`;
      const outDir = await freshOutDir(scratch, token);
      const daemon = spawn(process.execPath, [FIXTURE, backend, scratch.repoDir, outDir, PROBES_DIR, String(WALL_MS), token], { stdio: ['ignore', 'pipe', 'inherit'] });
      const line = await new Promise<string>((resolve, reject) => {
        const rl = createInterface({ input: daemon.stdout });
        rl.on('line', (text) => {
          if (text.startsWith('LAUNCHED')) resolve(text);
        });
        daemon.once('exit', (code) => reject(new Error(`fixture exited ${String(code)} before launching`)));
      });
      const [, , containerId] = line.split(' ');
      if (backend === 'bwrap') expect((await pidsWith(token)).length).toBeGreaterThan(0);
      daemon.kill('SIGKILL');
      if (backend === 'bwrap') {
        const ms = await timeUntil('the sandboxed child gone', async () => (await pidsWith(token)).length === 0, 5_000);
        console.info(`bwrap child gone ${Math.round(ms)} ms after the daemon's SIGKILL`);
      } else {
        const docker = new Docker({ socketPath: '/var/run/docker.sock' });
        expect(containerId).toMatch(/^[0-9a-f]{64}$/);
        const gone = async (): Promise<boolean> => docker.getContainer(containerId as string).inspect().then((i) => !i.State.Running && false, () => true);
        expect(await gone()).toBe(false); // still there right after the daemon died
        const ms = await timeUntil('the container removed', gone, GONE_WITHIN_MS);
        console.info(`docker container removed ${Math.round(ms)} ms after the daemon's SIGKILL (wall ${WALL_MS} ms)`);
      }
    }, 60_000);
  });
}
