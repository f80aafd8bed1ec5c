/**
 * Issue 16 acceptance: the daemon is SIGKILLed at each stage boundary (right after the store
 * write that ends a step commits) and mid-stage (candidates sleeping in their sandboxes), then
 * restarted on the same home. For every acknowledged task: terminal exactly once, no finished
 * stage run again (checked from the attempt records), no sandbox process or staging directory
 * left, and the task tarball seals and verifies. Real bwrap sandboxes, builtin engine
 * (test/fixtures/e2e/chaos-daemon.mjs). docs/behaviour.md#b13
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, expect, it } from 'vitest';
import { FusionClient } from '../../../src/client/index.js';
import { openSqliteStore } from '../../../src/store/sqlite-store.js';
import { createLogger } from '../../../src/log.js';
import type { AttemptRecord } from '../../../src/store/port.js';
import { DIST, REFILL_ARGS, ROOT, copyFixtureRepo, describeWithBwrap, freshRunRoot, ourSandboxProcesses, waitFor } from './helpers.js';

const run = promisify(execFile);
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface ChaosDaemon {
  proc: ChildProcess;
  socket: string;
  lines: () => string[];
  exited: Promise<void>;
}

async function spawnChaosDaemon(home: string, runRoot: string, killAt: string, delays: string): Promise<ChaosDaemon> {
  const proc = spawn(process.execPath, [join(ROOT, 'test', 'fixtures', 'e2e', 'chaos-daemon.mjs'), home, runRoot, killAt, delays], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const socket = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`chaos daemon did not start: ${err}`)), 30_000);
    const onData = (): void => {
      const m = /^READY (\S+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        proc.stdout!.off('data', onData);
        resolve(m[1]!);
      }
    };
    proc.stdout!.on('data', onData);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`chaos daemon exited before READY: ${err}`));
    });
  });
  cleanups.push(() => stopProc(proc, exited));
  return { proc, socket, lines: () => out.split('\n').filter(Boolean), exited };
}

async function stopProc(proc: ChildProcess, exited: Promise<void>): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  proc.kill('SIGTERM');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
  if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  await exited;
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
];

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
        first.proc.kill('SIGKILL');
      }
      await Promise.race([first.exited, new Promise((_, reject) => setTimeout(() => reject(new Error(`the daemon never reached ${c.killAt}: ${first.lines().join('\n')}`)), 90_000))]);
      if (c.externalAfterEnter === undefined) expect(first.lines()).toContain(`KILL ${c.killAt}`);
      // bwrap runs with --die-with-parent: nothing of the killed daemon survives it.
      await waitFor('the sandboxes to die with the daemon', () => ourSandboxProcesses().length === 0, 10_000);

      const second = await spawnChaosDaemon(home, runRoot, 'none', '0,0,0');
      const waited = (await new FusionClient(second.socket).call('GET', `/v1/tasks/${taskId}/wait?timeoutMs=90000`)) as { terminal: boolean; task: Record<string, any> };
      expect(waited.terminal).toBe(true);
      expect(waited.task.state).toBe('completed');
      await stopProc(second.proc, second.exited);

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
