/**
 * The stage worker pool: threads are reused across runs (a thread per stage left
 * native memory behind), and a run that times out, is cancelled or crashes ends in its own
 * outcome with its thread terminated and never reused.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { createStageWorkerPool, type StageWorkers } from '../../../src/workflow/stage-workers.js';

const JOB = join(import.meta.dirname, '..', '..', 'fixtures', 'stage-pool', 'fake-stage-worker.mjs');

describe('stage worker pool', () => {
  let dir: string;
  let pool: StageWorkers;
  let n = 0;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'fusion-stage-pool-'));
    pool = createStageWorkerPool({ jobFile: JOB, log: silentLogger(), maxIdle: 1, maxRunsPerWorker: 3 });
  });
  afterEach(async () => {
    await pool.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const run = (how: string, extra: { timeoutMs?: number; signal?: AbortSignal } = {}) =>
    pool.run({
      name: `t:evaluator:${++n}`,
      workerData: { requestFile: how, outDir: join(dir, 'threads'), brokerSocket: '/nonexistent' },
      timeoutMs: extra.timeoutMs ?? 10_000,
      maxOldGenerationSizeMb: 64,
      ...(extra.signal ? { signal: extra.signal } : {}),
    });
  const threads = (): string[] => readFileSync(join(dir, 'threads'), 'utf8').trim().split('\n');

  it('reuses one thread across runs and retires it after maxRunsPerWorker', async () => {
    for (let i = 0; i < 4; i++) expect(await run('ok')).toMatchObject({ exitCode: 0, reason: 'exited' });
    const t = threads();
    expect(new Set(t.slice(0, 3)).size).toBe(1);
    expect(t[3]).not.toBe(t[0]);
  });

  it('stops a hung run at its timeout and runs the next stage on a fresh thread', async () => {
    expect(await run('hang', { timeoutMs: 200 })).toMatchObject({ reason: 'timeout' });
    expect(await run('ok')).toMatchObject({ exitCode: 0, reason: 'exited' });
    const t = threads();
    expect(t[1]).not.toBe(t[0]);
  });

  it('stops a run when its task is cancelled, before or during the run', async () => {
    const ac = new AbortController();
    const pending = run('hang', { signal: ac.signal });
    setTimeout(() => ac.abort(), 100);
    expect(await pending).toMatchObject({ reason: 'aborted' });
    expect(await run('ok', { signal: AbortSignal.abort() })).toMatchObject({ reason: 'aborted' });
    expect(await run('ok')).toMatchObject({ exitCode: 0 });
  });

  it('reports a crashed or exiting thread as a failed run and replaces it', async () => {
    expect(await run('crash')).toMatchObject({ exitCode: 1, reason: 'exited' });
    expect(await run('exit7')).toMatchObject({ exitCode: 7, reason: 'exited' });
    expect(await run('ok')).toMatchObject({ exitCode: 0 });
    expect(new Set(threads()).size).toBe(3);
  });
});
