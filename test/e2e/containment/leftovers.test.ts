/**
 * Nothing left behind by a SIGKILLed daemon (docs/operations.md#leftovers): a process that
 * launches one sandbox is SIGKILLed several times — at moments spread over the launch itself
 * (lease, mounts, bwrap's set-up handshake, container creation) and once while the sandbox runs.
 * Then, as a restarted daemon does, the orphan containers and the sandbox leftovers are reaped
 * and one more sandbox runs to its end. Afterwards: 0 mounts of those processes, 0
 * `fusion-binds-*` directories, 0 uid claims of theirs, 0 processes of the pool that no live
 * sandbox holds, 0 processes of theirs at all. On bwrap the sandbox must die with its launcher
 * even during the handshake, before any reaper runs (the parent-death signal from the first exec).
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createLogger } from '../../../src/log.js';
import { createDockerLauncher } from '../../../src/launcher/docker.js';
import { HOST_OUT_BASE } from '../../../src/launcher/out-mount.js';
import { reapSandboxLeftovers, mountPoints } from '../../../src/launcher/sandbox-reaper.js';
import { claimHeld, createUidPool, DEFAULT_CLAIM_DIR } from '../../../src/launcher/uid-pool.js';
import { backendAvailability, BACKENDS, createLauncher, describeBackend, freshOutDir, IS_ROOT, limits, makeScratch, PROBES_DIR, run, type Scratch } from './helpers.js';
import { waitFor } from '../../helpers/wait.js';

const availability = await backendAvailability();
const FIXTURE = join(import.meta.dirname, '../../fixtures/e2e/launch-and-hang.mjs');
/** ms after "READY" (the launch begins) at which each run is killed; undefined: once launched. */
const KILL_AT: Record<string, Array<number | undefined>> = {
  bwrap: [0, 5, 10, 20, 30, 45, 60, 90, undefined],
  docker: [0, 40, 150, undefined],
  gvisor: [0, 200, undefined],
};

/** Host pids whose command line holds `token` (the sandboxed probe carries it as an argument). */
async function pidsWith(token: string): Promise<number[]> {
  const found: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const cmdline = await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.split('\0').some((arg) => arg.includes(token))) found.push(Number(name));
  }
  return found;
}

/** Processes with an id of the default pool that no live claim holds. */
async function strayPoolProcesses(range: { start: number; end: number }): Promise<string[]> {
  const found: string[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const status = await readFile(`/proc/${name}/status`, 'utf8').catch(() => '');
    // A zombie holds no uid in any way that matters (it cannot run, open or be signalled): a
    // sandbox's inner bwrap whose parent went first is reparented to the host's init, which on
    // some hosts reaps only every few seconds. Only a live process is a stray.
    if (/^State:\s+Z/m.test(status)) continue;
    const ids = [...status.matchAll(/^(?:Uid|Gid):\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/gm)].flatMap((m) => m.slice(1, 5).map(Number));
    const stray = ids.find((id) => id >= range.start && id <= range.end && !claimHeld(DEFAULT_CLAIM_DIR, id));
    if (stray === undefined) continue;
    const cmdline = (await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '')).replaceAll('\0', ' ').slice(0, 200);
    const claim = await readFile(join(DEFAULT_CLAIM_DIR, String(stray)), 'utf8').catch(() => 'no claim');
    found.push(`${name} uid ${stray}: ${cmdline} (claim: ${claim})`);
  }
  return found;
}

for (const backend of BACKENDS) {
  describeBackend(`leftovers after SIGKILLs [${backend}]`, availability[backend], () => {
    let scratch: Scratch;
    beforeAll(async () => {
      scratch = await makeScratch(`fusion-leftovers-${backend}-`);
    });
    afterAll(async () => {
      await scratch.cleanup();
    });

    it.runIf(IS_ROOT)('a restart plus one sandbox leaves 0 mounts, binds dirs, claims and stray processes', async () => {
      const startedAt = Date.now();
      const token = `left-${randomUUID().slice(0, 8)}`;
      const killed: number[] = [];
      for (const [i, at] of KILL_AT[backend]!.entries()) {
        const outDir = await freshOutDir(scratch, `${token}-${i}`);
        const daemon = spawn(process.execPath, [FIXTURE, backend, scratch.repoDir, outDir, PROBES_DIR, '600000', `${token}-${i}`], { stdio: ['ignore', 'pipe', 'ignore'] });
        const exited = new Promise((resolve) => daemon.once('exit', resolve));
        await new Promise<void>((resolve, reject) => {
          const rl = createInterface({ input: daemon.stdout });
          rl.on('line', (line) => {
            // Killed `at` ms into the launch: the moment of the kill is the scenario, not a wait.
            if (at !== undefined && line === 'READY') setTimeout(resolve, at);
            if (at === undefined && line.startsWith('LAUNCHED')) resolve();
          });
          daemon.once('exit', (code) => reject(new Error(`fixture exited ${String(code)} before it was killed`)));
        });
        daemon.kill('SIGKILL');
        await exited;
        killed.push(daemon.pid as number);
      }
      if (backend === 'bwrap') {
        // No reaper yet: every sandbox (and every half-made launch) died with its launcher.
        await waitFor('every sandbox of the killed launchers gone', async () => (await pidsWith(token)).length === 0, 5_000);
      }

      // What a restarted daemon does (src/main.ts): orphan containers, then the sandbox leftovers.
      const log = createLogger({ level: 'silent' });
      if (backend !== 'bwrap') await createDockerLauncher({ log, owner: 'fusion-e2e-daemon-death' }).reapOrphans(new Set());
      const pool = createUidPool();
      await reapSandboxLeftovers({ log, runRoot: join(scratch.root, 'run-root'), pool });
      const launcher = createLauncher(backend, log);
      const one = await run(launcher, scratch, { command: ['node', '-e', '0'], limits: limits() });
      expect(one.exit.exitCode).toBe(0);

      expect(await pidsWith(token)).toEqual([]);
      // Other tests on this host start and end sandboxes meanwhile: a stray is one that stays.
      const first = await strayPoolProcesses(pool.range);
      await new Promise((r) => setTimeout(r, 1_500));
      const again = await strayPoolProcesses(pool.range);
      expect(first.filter((s) => again.includes(s))).toEqual([]);
      const points = mountPoints(await readFile('/proc/self/mountinfo', 'utf8'));
      const theirs = points.filter((p) => killed.some((pid) => p.startsWith(`${HOST_OUT_BASE}/${pid}.`) || p.includes(`/fusion-tmp-${pid}-`)) || p.includes('/fusion-binds-'));
      expect(theirs).toEqual([]);
      expect(await readdir(HOST_OUT_BASE).then((names) => names.filter((n) => killed.some((pid) => n.startsWith(`${pid}.`))), () => [])).toEqual([]);
      const binds = [];
      for (const name of await readdir(tmpdir())) {
        if (name.startsWith('fusion-binds-') && (await stat(join(tmpdir(), name))).mtimeMs >= startedAt) binds.push(name);
      }
      expect(binds).toEqual([]);
      const claims = [];
      for (const name of await readdir(DEFAULT_CLAIM_DIR).catch(() => [] as string[])) {
        const text = await readFile(join(DEFAULT_CLAIM_DIR, name), 'utf8').catch(() => '');
        if (text.includes(token)) claims.push(name);
      }
      expect(claims).toEqual([]);
    }, 240_000);
  });
}
