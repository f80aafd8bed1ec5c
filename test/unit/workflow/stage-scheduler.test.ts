/**
 * Bree schedules the evaluator, repair and merger stages: its job list names them, every stage
 * run is a fresh worker thread started by Bree for that job with the run's workerData and heap
 * limit, and a run that times out, is cancelled or crashes ends in its own outcome. Runs beyond
 * the lane count wait for a lane (the stage concurrency limit).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { STAGE_JOBS, startStageScheduler, type StageScheduler } from '../../../src/workflow/stage-workers.js';
import { waitFor } from '../fakes/server-state.js';

const JOB = join(import.meta.dirname, '..', '..', 'fixtures', 'stage-jobs', 'fake-stage-worker.mjs');

interface RunLine {
  threadId: number;
  job: string;
  how: string;
  heapMb: number;
}

describe('Bree stage scheduler', () => {
  let dir: string;
  let scheduler: StageScheduler;
  let n = 0;
  const start = async (lanes: number): Promise<void> => {
    scheduler = await startStageScheduler({ jobFile: JOB, log: silentLogger(), lanes });
  };
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'fusion-stage-bree-'));
  });
  afterEach(async () => {
    await scheduler.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const run = (how: string, extra: { stage?: string; timeoutMs?: number; signal?: AbortSignal; heapMb?: number } = {}) =>
    scheduler.run({
      name: `t:${extra.stage ?? 'evaluator'}:${++n}`,
      workerData: { requestFile: how, outDir: join(dir, 'runs'), brokerSocket: '/nonexistent' },
      timeoutMs: extra.timeoutMs ?? 10_000,
      maxOldGenerationSizeMb: extra.heapMb ?? 64,
      ...(extra.signal ? { signal: extra.signal } : {}),
    });
  // Only whole lines: a worker may have created the file, or be writing its line, right now.
  const lines = (): RunLine[] =>
    existsSync(join(dir, 'runs'))
      ? readFileSync(join(dir, 'runs'), 'utf8').split('\n').slice(0, -1).map((l) => JSON.parse(l) as RunLine)
      : [];

  it("names the evaluator, repair and merger in Bree's job list", async () => {
    await start(2);
    expect(STAGE_JOBS).toEqual(['evaluator', 'repair', 'merger']);
    expect(scheduler.breeJobs()).toEqual(['evaluator', 'repair', 'merger']);
  });

  it('runs each stage as its Bree job, in a fresh thread per run, with the run heap limit', async () => {
    await start(1);
    expect(await run('ok', { stage: 'evaluator', heapMb: 48 })).toMatchObject({ exitCode: 0, reason: 'exited' });
    expect(await run('ok', { stage: 'repair' })).toMatchObject({ exitCode: 0, reason: 'exited' });
    expect(await run('ok', { stage: 'merger' })).toMatchObject({ exitCode: 0, reason: 'exited' });
    expect(await run('ok', { stage: 'evaluator' })).toMatchObject({ exitCode: 0, reason: 'exited' });
    const l = lines();
    expect(l.map((x) => x.job)).toEqual(['evaluator', 'repair', 'merger', 'evaluator']);
    expect(new Set(l.map((x) => x.threadId)).size).toBe(4);
    expect(l.map((x) => x.heapMb)).toEqual([48, 64, 64, 64]);
  });

  it('refuses a run that names no stage job', async () => {
    await start(1);
    await expect(run('ok', { stage: 'candidate' })).rejects.toMatchObject({ code: 'launch_failed' });
  });

  it('stops a hung run at its timeout and runs the next stage', async () => {
    await start(1);
    expect(await run('hang', { timeoutMs: 200 })).toMatchObject({ reason: 'timeout' });
    expect(await run('ok')).toMatchObject({ exitCode: 0, reason: 'exited' });
  });

  it('stops a run when its task is cancelled, before or during the run', async () => {
    await start(1);
    const ac = new AbortController();
    const pending = run('hang', { signal: ac.signal });
    await waitFor(() => lines().length === 1, 20_000);
    ac.abort();
    expect(await pending).toMatchObject({ reason: 'aborted' });
    expect(await run('ok', { signal: AbortSignal.abort() })).toMatchObject({ reason: 'aborted' });
    expect(await run('ok')).toMatchObject({ exitCode: 0 });
    // The run cancelled before it started never had a thread.
    expect(lines()).toHaveLength(2);
  });

  it('reports a crashed or exiting thread with its exit code', async () => {
    await start(1);
    expect(await run('crash')).toMatchObject({ exitCode: 1, reason: 'exited' });
    expect(await run('exit7')).toMatchObject({ exitCode: 7, reason: 'exited' });
    expect(await run('ok')).toMatchObject({ exitCode: 0 });
  });

  it('holds a run that finds every lane busy until one is free; cancelled while waiting, it never starts', async () => {
    await start(1);
    const gate = join(dir, 'gate');
    const first = run(`gate:${gate}`, { stage: 'evaluator' });
    await waitFor(() => lines().length === 1, 20_000);
    const ac = new AbortController();
    const held = run('ok', { stage: 'merger', signal: ac.signal });
    const next = run('ok', { stage: 'repair' });
    ac.abort();
    expect(await held).toMatchObject({ reason: 'aborted', exitCode: 1 });
    expect(lines().map((x) => x.job)).toEqual(['evaluator']);
    writeFileSync(gate, '');
    expect(await first).toMatchObject({ exitCode: 0, reason: 'exited' });
    expect(await next).toMatchObject({ exitCode: 0, reason: 'exited' });
    expect(lines().map((x) => x.job)).toEqual(['evaluator', 'repair']);
  });

  it('runs as many stages at once as it has lanes', async () => {
    await start(2);
    const gate = join(dir, 'gate');
    const a = run(`gate:${gate}`, { stage: 'evaluator' });
    const b = run(`gate:${gate}`, { stage: 'evaluator' });
    // Both threads start before either can end: two runs of the same stage at once.
    await waitFor(() => lines().length === 2, 20_000);
    writeFileSync(gate, '');
    expect(await a).toMatchObject({ exitCode: 0 });
    expect(await b).toMatchObject({ exitCode: 0 });
  });

  it('refuses new runs once stopped', async () => {
    await start(1);
    await scheduler.stop();
    await expect(run('ok')).rejects.toMatchObject({ code: 'launch_failed' });
  });
});
