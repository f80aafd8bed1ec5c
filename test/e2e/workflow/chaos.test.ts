/**
 * Restart recovery under faults (docs/behaviour.md#b13, docs/operations.md#restart-recovery). The
 * daemon is SIGKILLed at each stage boundary (right after the store write that ends a step
 * commits), right after each stage's success commits, and mid-stage (candidates sleeping in their
 * sandboxes), then restarted on the same home. For every acknowledged task: terminal (completed)
 * within 60 s of the restart, exactly once; no finished stage run again, counted twice over — by
 * the attempt records and by the fake model (one RUN line per run of a stage, in both daemons);
 * no sandbox process or staging directory left; the task tarball seals and verifies. Then: a task
 * killed twice ends supervisor_restarted with every attempt closed (store and sealed tarball), and
 * a data disk (48 MiB tmpfs) filled mid-run and freed: the run is set aside and completes within
 * 60 s of the space coming back. Real bwrap sandboxes, builtin engine
 * (test/fixtures/e2e/chaos-daemon.mjs). Cost: 15 cases, about 5 s each on a quiet 2-core machine
 * (the second-kill and full-disk cases 10–20 s); 7 min under a load average of 15.
 */
import { execFile } from 'node:child_process';
import { startFixtureDaemon, type FixtureDaemon } from '../../helpers/cli.js';
import { within } from '../../helpers/wait.js';
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, expect, it } from 'vitest';
import { FusionClient } from '../../../src/client/index.js';
import { openSqliteStore } from '../../../src/store/sqlite-store.js';
import { createLogger } from '../../../src/log.js';
import type { AttemptRecord } from '../../../src/store/port.js';
import { readMembers } from '../../../src/audit/tar-members.js';
import { DIST, REFILL_ARGS, ROOT, copyFixtureRepo, describeWithBwrap, freshRunRoot, ourSandboxProcesses, waitFor } from './helpers.js';

const run = promisify(execFile);
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type ChaosDaemon = FixtureDaemon;

async function spawnChaosDaemon(home: string, runRoot: string, killAt: string, delays: string, env: Record<string, string> = {}): Promise<ChaosDaemon> {
  const d = await startFixtureDaemon(join(ROOT, 'test', 'fixtures', 'e2e', 'chaos-daemon.mjs'), [home, runRoot, killAt, delays], { env });
  cleanups.push(() => d.started.stop().then(() => undefined));
  return d;
}

interface Case {
  name: string;
  killAt: string;
  delays: string;
  /** Stages that had succeeded before the kill: exactly one attempt each, attempt 1. */
  ranOnce: string[];
  /** Kill from outside once this many candidates sleep in their sandboxes (mid-stage). */
  externalAfterEnter?: number;
}

const ALL = ['candidate-1', 'candidate-2', 'candidate-3', 'evaluator', 'merger'];
const CASES: Case[] = [
  { name: 'mid candidate stage (all three sleeping)', killAt: 'none', delays: '60000,60000,60000', ranOnce: [], externalAfterEnter: 3 },
  { name: 'after initializing → candidates_running', killAt: 'transition:candidates_running', delays: '0,0,0', ranOnce: [] },
  { name: 'after one candidate succeeded', killAt: 'checkpoint:candidate-1', delays: '0,60000,60000', ranOnce: ['candidate-1'] },
  { name: 'after two candidates succeeded', killAt: 'checkpoint:candidate-1+candidate-3', delays: '0,60000,0', ranOnce: ['candidate-1', 'candidate-3'] },
  { name: 'after candidates_complete', killAt: 'transition:candidates_complete', delays: '0,0,0', ranOnce: ['candidate-1', 'candidate-2', 'candidate-3'] },
  { name: 'after candidates_complete → evaluating', killAt: 'transition:evaluating', delays: '0,0,0', ranOnce: ['candidate-1', 'candidate-2', 'candidate-3'] },
  { name: 'after the evaluation checkpoint', killAt: 'checkpoint:evaluation', delays: '0,0,0', ranOnce: ['candidate-1', 'candidate-2', 'candidate-3', 'evaluator'] },
  { name: 'after evaluating → merging', killAt: 'transition:merging', delays: '0,0,0', ranOnce: ['candidate-1', 'candidate-2', 'candidate-3', 'evaluator'] },
  { name: 'after the merger succeeded, before the commit', killAt: 'checkpoint:merged', delays: '0,0,0', ranOnce: ALL },
  { name: 'after the commit, before the seal', killAt: 'commit', delays: '0,0,0', ranOnce: ALL },
  // The attempt's success is the commit that counts: its checkpoint is in the same transaction.
  { name: 'right after a candidate attempt committed its success', killAt: 'attempt:candidate-2', delays: '60000,0,60000', ranOnce: ['candidate-2'] },
  { name: 'right after the evaluator attempt committed its success', killAt: 'attempt:evaluator', delays: '0,0,0', ranOnce: ['candidate-1', 'candidate-2', 'candidate-3', 'evaluator'] },
  { name: 'right after the merger attempt committed its success', killAt: 'attempt:merger', delays: '0,0,0', ranOnce: ALL },
];

/** How often each stage of `taskId` ran, from the fake model's own count (its first call per run). */
function stageRuns(daemons: readonly ChaosDaemon[], taskId: string): Map<string, number> {
  const runs = new Map<string, number>();
  for (const d of daemons) {
    for (const line of d.lines()) {
      const m = /^RUN (\S+) (\S+)$/.exec(line);
      if (m && m[1] === taskId) runs.set(m[2]!, (runs.get(m[2]!) ?? 0) + 1);
    }
  }
  return runs;
}

describeWithBwrap('chaos: SIGKILL at every stage boundary and mid-stage, then restart', () => {
  for (const c of CASES) {
    it(`killed ${c.name}: terminal once, nothing finished runs again, nothing left behind`, async () => {
      const home = mkdtempSync(join(tmpdir(), 'fusion-chaos-home-'));
      const fixture = copyFixtureRepo();
      const runRoot = freshRunRoot();
      cleanups.push(() => {
        for (const dir of [home, fixture.root, runRoot]) rmSync(dir, { recursive: true, force: true });
      });

      const first = await spawnChaosDaemon(home, runRoot, c.killAt, c.delays);
      const receipt = (await new FusionClient(first.socket).call('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo: fixture.repo })) as { taskId: string };
      const taskId = receipt.taskId;
      if (c.externalAfterEnter !== undefined) {
        await waitFor('candidates sleeping in their sandboxes', () => first.lines().filter((l) => l.startsWith(`ENTER ${taskId} `)).length >= c.externalAfterEnter!, 30_000);
        first.started.proc.kill('SIGKILL');
      }
      await within(first.started.exited, 90_000, `the daemon to reach ${c.killAt} (and die there); its stdout:\n${first.lines().join('\n')}`);
      if (c.externalAfterEnter === undefined) expect(first.lines()).toContain(`KILL ${c.killAt}`);
      // bwrap runs with --die-with-parent: nothing of the killed daemon survives it.
      await waitFor('the sandboxes to die with the daemon', () => ourSandboxProcesses().length === 0, 10_000);

      const second = await spawnChaosDaemon(home, runRoot, 'none', '0,0,0');
      // Acknowledged, so not lost: terminal (completed) within 60 s of the restart.
      const waited = (await new FusionClient(second.socket).call('GET', `/v1/tasks/${taskId}/wait?timeoutMs=60000`)) as { terminal: boolean; task: Record<string, any> };
      expect(waited.terminal).toBe(true);
      expect(waited.task.state).toBe('completed');
      await second.started.stop();

      // Counted by the model, not by the workflow's own records: what had finished before the
      // kill ran exactly once in both daemons together, and every stage ran.
      const runs = stageRuns([first, second], taskId);
      for (const stage of c.ranOnce) expect(runs.get(stage), `${stage} runs: ${JSON.stringify([...runs])}`).toBe(1);
      for (const stage of ALL) expect(runs.get(stage) ?? 0, `${stage} runs: ${JSON.stringify([...runs])}`).toBeGreaterThanOrEqual(1);

      // Nothing left behind: no sandbox process, no staging directory.
      expect(ourSandboxProcesses()).toEqual([]);
      expect(existsSync(runRoot) ? readdirSync(runRoot) : []).toEqual([]);

      const store = await openSqliteStore({ file: join(home, 'fusion.db'), log: createLogger({ level: 'silent' }) });
      let attempts: AttemptRecord[];
      try {
        const events = await store.listEvents(taskId, 0);
        expect(events.filter((e) => e.kind === 'terminal')).toHaveLength(1);
        attempts = await store.listAttempts(taskId);
        expect(await store.getTaskTarball(taskId)).not.toBeNull();
      } finally {
        await store.close();
      }
      const byStage = new Map<string, AttemptRecord[]>();
      for (const a of attempts) byStage.set(a.stage, [...(byStage.get(a.stage) ?? []), a]);
      const summary = [...byStage].map(([stage, list]) => `${stage}:${list.map((a) => `${a.attempt}${a.status[0]}`).join(',')}`).sort();
      // What had finished before the kill ran exactly once.
      for (const stage of c.ranOnce) expect(byStage.get(stage)?.map((a) => `${a.attempt}:${a.status}`), summary.join(' ')).toEqual(['1:succeeded']);
      // No stage has two successes; a success is always the stage's last attempt.
      for (const stage of ALL) {
        const list = (byStage.get(stage) ?? []).sort((a, b) => a.attempt - b.attempt);
        expect(list.filter((a) => a.status === 'succeeded'), summary.join(' ')).toHaveLength(1);
        expect(list.at(-1)!.status, summary.join(' ')).toBe('succeeded');
      }

      // The resumed task seals, and its tarball verifies offline.
      const verify = await run(process.execPath, [join(DIST, 'src', 'cli', 'main.js'), 'audit', 'verify', taskId, '--data', home], { cwd: ROOT }).then(
        (r) => ({ code: 0, out: r.stdout + r.stderr }),
        (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }),
      );
      expect(verify.code, verify.out).toBe(0);
    }, 180_000);
  }
});

describeWithBwrap('chaos: a second kill, and a data disk that fills mid-run', () => {
  it('a task killed twice mid-stage fails supervisor_restarted with no attempt left running, in the store or its sealed tarball', async () => {
    const home = mkdtempSync(join(tmpdir(), 'fusion-chaos-home-'));
    const fixture = copyFixtureRepo();
    const runRoot = freshRunRoot();
    cleanups.push(() => {
      for (const dir of [home, fixture.root, runRoot]) rmSync(dir, { recursive: true, force: true });
    });
    let taskId = '';
    for (let kill = 0; kill < 2; kill++) {
      const d = await spawnChaosDaemon(home, runRoot, 'none', '60000,60000,60000');
      if (kill === 0) taskId = ((await new FusionClient(d.socket).call('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo: fixture.repo })) as { taskId: string }).taskId;
      await waitFor('candidates sleeping in their sandboxes', () => d.lines().filter((l) => l.startsWith(`ENTER ${taskId} `)).length >= 3, 30_000);
      await d.started.stop('SIGKILL');
      await waitFor('the sandboxes to die with the daemon', () => ourSandboxProcesses().length === 0, 10_000);
    }
    const last = await spawnChaosDaemon(home, runRoot, 'none', '0,0,0');
    const waited = (await new FusionClient(last.socket).call('GET', `/v1/tasks/${taskId}/wait?timeoutMs=60000`)) as { terminal: boolean; task: Record<string, any> };
    expect(waited.task.state).toBe('failed');
    expect(waited.task.error).toMatchObject({ code: 'supervisor_restarted' });
    await last.started.stop();

    const store = await openSqliteStore({ file: join(home, 'fusion.db'), log: createLogger({ level: 'silent' }) });
    try {
      const attempts = await store.listAttempts(taskId);
      // Three candidates per run, two runs: all six closed, none running.
      expect(attempts).toHaveLength(6);
      expect(attempts.filter((a) => a.status === 'running')).toEqual([]);
      expect(attempts.every((a) => a.endedAt !== null && JSON.parse(a.detail ?? '{}').interrupted === true)).toBe(true);
      const tarball = await store.getTaskTarball(taskId);
      expect(tarball).not.toBeNull();
      const sealed = readMembers(tarball!.data).find((m) => m.name === 'attempts.json');
      expect(sealed, 'attempts.json in the sealed tarball').toBeDefined();
      expect((JSON.parse(sealed!.data.toString('utf8')) as Array<{ status: string }>).map((a) => a.status)).toEqual(Array(6).fill('failed'));
    } finally {
      await store.close();
    }
  }, 180_000);

  const isRoot = process.getuid?.() === 0;
  if (!isRoot && process.env.CI !== 'true') console.warn('\n!!! SKIPPING the mid-run full-disk chaos case: mounting its tmpfs data disk needs root\n');
  (isRoot || process.env.CI === 'true' ? it : it.skip)('a data disk that fills mid-run: the run is set aside, resumes once space is freed, completes within 60 s, nothing finished runs twice', async () => {
    expect(isRoot, 'the full-disk chaos case needs root to mount its tmpfs').toBe(true);
    const mnt = mkdtempSync(join(tmpdir(), 'fusion-chaos-disk-'));
    await run('mount', ['-t', 'tmpfs', '-o', 'size=48m', 'tmpfs', mnt]);
    const fixture = copyFixtureRepo();
    const runRoot = freshRunRoot();
    cleanups.push(async () => {
      await run('umount', ['-l', mnt]).catch(() => undefined);
      for (const dir of [mnt, fixture.root, runRoot]) rmSync(dir, { recursive: true, force: true });
    });
    const home = join(mnt, 'home');
    const d = await spawnChaosDaemon(home, runRoot, 'none', '4000,4000,4000', { FUSION_CHAOS_RESERVE_BYTES: String(1024 * 1024) });
    const client = new FusionClient(d.socket);
    const { taskId } = (await client.call('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo: fixture.repo })) as { taskId: string };
    await waitFor('candidates sleeping in their sandboxes', () => d.lines().filter((l) => l.startsWith(`ENTER ${taskId} `)).length >= 3, 30_000);
    // The disk fills while the candidates think: their outputs, attempts and checkpoints meet ENOSPC.
    const filler = fillDisk(mnt);
    await waitFor('the run to meet the full disk', () => /the disk is full: the run is set aside/.test(d.stderr()), 60_000);
    const stuck = (await client.call('GET', `/v1/tasks/${taskId}`)) as { state: string };
    expect(stuck.state).not.toBe('completed');
    unlinkSync(filler);
    const freedAt = Date.now();
    const waited = (await client.call('GET', `/v1/tasks/${taskId}/wait?timeoutMs=60000`)) as { terminal: boolean; task: Record<string, any> };
    expect(waited.terminal, `non-terminal 60 s after the disk was freed: ${waited.task.state}`).toBe(true);
    expect(Date.now() - freedAt).toBeLessThan(60_000);
    expect(waited.task.state, JSON.stringify(waited.task.error)).toBe('completed');
    await d.started.stop();

    const runs = stageRuns([d], taskId);
    expect(runs.get('evaluator')).toBe(1);
    expect(runs.get('merger')).toBe(1);
    const store = await openSqliteStore({ file: join(home, 'fusion.db'), log: createLogger({ level: 'silent' }) });
    try {
      const attempts = await store.listAttempts(taskId);
      expect(attempts.filter((a) => a.status === 'running')).toEqual([]);
      for (const stage of ALL) expect(attempts.filter((a) => a.stage === stage && a.status === 'succeeded'), stage).toHaveLength(1);
      expect(await store.getTaskTarball(taskId)).not.toBeNull();
    } finally {
      await store.close();
    }
    expect(ourSandboxProcesses()).toEqual([]);
  }, 180_000);
});

/** Writes until ENOSPC: the filesystem is then full to the byte. Returns the filler's path. */
function fillDisk(dir: string): string {
  const file = join(dir, 'filler');
  const fd = openSync(file, 'w');
  try {
    for (const size of [1024 * 1024, 4096, 512]) {
      const chunk = Buffer.alloc(size, 1);
      try {
        for (;;) writeSync(fd, chunk);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
      }
    }
  } finally {
    closeSync(fd);
  }
  return file;
}
