/**
 * how a Fusion run fails, through the real daemon and real
 * bwrap sandboxes. Each case runs its own daemon with a test-only roster or launcher seam.
 */
import { appendFileSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { OUTPUT_CAPS } from '../../../src/contracts/constants.js';
import type { ModelProvider } from '../../../src/models/port.js';
import {
  isSandboxUid,
  REFILL_ARGS,
  builtin,
  builtinRoster,
  describeWithBwrap,
  latch,
  listAttemptDirs,
  ourSandboxProcesses,
  slowCandidate,
  startE2EDaemon,
  stillAlive,
  treeOf,
  waitFor,
  wrapProvider,
  type E2EDaemon,
  type ProcInfo,
} from './helpers.js';

let d: E2EDaemon | undefined;
afterEach(async () => {
  await d?.close();
  d = undefined;
});

async function attemptsOf(taskId: string): Promise<string[]> {
  return (await d!.daemon.store.listAttempts(taskId)).map((a) => `${a.stage}#${a.attempt}:${a.status}`).sort();
}

async function expectNoCommit(taskId: string): Promise<void> {
  const result = (await d!.client.call('GET', `/v1/tasks/${taskId}/result`)) as Record<string, any>;
  expect(result).toMatchObject({ status: 'failed', delivery: 'none', answer: { present: false, reason: 'run_did_not_commit' } });
  expect(await d!.daemon.store.getResult(taskId)).toBeNull();
  expect(existsSync(join(d!.home, 'tasks', taskId, 'result'))).toBe(false);
}

function expectStagingGone(): void {
  expect(existsSync(d!.runRoot) ? readdirSync(d!.runRoot) : []).toEqual([]);
}

describeWithBwrap('fusion workflow e2e: failures', () => {
  it('a crashing candidate fails the run, aborts its running siblings, and never goes 2-of-3', async () => {
    const siblingsUp = latch(2);
    const crash: ModelProvider = wrapProvider(builtin('path-search'), async () => {
      // Crash only once both siblings are inside a model call, so they are really running.
      await Promise.race([siblingsUp.done, new Promise((r) => setTimeout(r, 20_000))]);
      throw new Error('simulated provider crash');
    });
    d = await startE2EDaemon({
      roster: builtinRoster({ candidates: { 1: slowCandidate('content-search', 60_000, siblingsUp.mark), 2: crash, 3: slowCandidate('definition-search', 60_000, siblingsUp.mark) } }),
    });
    const { taskId } = await d.submit();
    await siblingsUp.done;
    // Every sandbox of the task, down to the node child, while all three run (with the task's
    // replay sandbox beside them).
    const snapshot: ProcInfo[] = await waitFor('three sandboxes with their children', () => {
      const candidates = d!.launches.filter((l) => !l.label.endsWith('.replay')).map((l) => l.pid!).filter(Boolean);
      const tree = treeOf(d!.launches.map((l) => l.pid!).filter(Boolean));
      return candidates.length === 3 && treeOf(candidates).length >= 9 ? tree : undefined;
    });
    expect(snapshot.every((p) => isSandboxUid(p.uid))).toBe(true);
    // The probe used after the run sees them too (it is not vacuous).
    expect(ourSandboxProcesses().length).toBeGreaterThanOrEqual(9);

    const started = Date.now();
    const task = await d.waitTerminal(taskId);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(task.state).toBe('failed');
    expect(['child_failed', 'model_error']).toContain(task.error.code);
    expect(task.error.message).toContain('candidate-2');
    expect(task.error.message).toContain('simulated provider crash');
    expect(task.error.state).toBe('candidates_running');
    // The siblings were stopped, not awaited: their attempts ended as failed (cancelled by the stage).
    const attempts = await d.daemon.store.listAttempts(taskId);
    expect(attempts.map((a) => `${a.stage}:${a.status}`).sort()).toEqual(['candidate-1:failed', 'candidate-2:failed', 'candidate-3:failed']);
    for (const a of attempts) expect(a.endedAt).not.toBeNull();
    for (const stage of ['candidate-1', 'candidate-3']) {
      const detail = JSON.parse(attempts.find((a) => a.stage === stage)!.detail!) as { error: { code: string; message: string } };
      expect(detail.error).toMatchObject({ code: 'cancelled' });
      expect(detail.error.message).toContain('sibling_failed');
    }
    // No evaluator, no merger, no result: never 2-of-3.
    expect(await d.daemon.store.getCheckpoint(taskId, 'candidates')).toBeNull();
    expect(await d.daemon.store.getCheckpoint(taskId, 'anonymization')).toBeNull();
    await expectNoCommit(taskId);
    // Not one process of the three sandboxes is left.
    expect(stillAlive(snapshot)).toEqual([]);
    expect(ourSandboxProcesses()).toEqual([]);
    for (const l of d.launches) expect(l.exit).toBeDefined();
    expectStagingGone();
  });

  it('a tampered tool-call log fails the run with child_event_invalid', async () => {
    d = await startE2EDaemon({
      hooks: {
        afterExit: (spec) => {
          // One byte appended after the sandbox exited, before the supervisor collects it.
          if (spec.label === 'candidate-2.attempt-1') appendFileSync(join(spec.outDir, 'candidate-2.attempt-1.tool-calls.jsonl'), 'x');
        },
      },
    });
    const { taskId } = await d.submit();
    const task = await d.waitTerminal(taskId);
    expect(task.state).toBe('failed');
    expect(task.error.code).toBe('child_event_invalid');
    expect(task.error.message).toBe('tool-call log invalid: log has trailing partial line');
    const attempt = (await d.daemon.store.listAttempts(taskId)).find((a) => a.stage === 'candidate-2')!;
    expect(attempt.status).toBe('failed');
    // The evidence is kept as collected (tampered byte included), with its own digest.
    const kept = readFileSync(join(d.home, 'tasks', taskId, 'attempts', 'candidate-2.attempt-1', 'candidate-2.attempt-1.tool-calls.jsonl'), 'utf8');
    expect(kept.endsWith('\nx')).toBe(true);
    expect(attempt.tarballSha256).toMatch(/^[0-9a-f]{64}$/);
    await expectNoCommit(taskId);
    expect(ourSandboxProcesses()).toEqual([]);
  });

  it('a tampered seal fails the run with child_event_invalid', async () => {
    d = await startE2EDaemon({
      hooks: {
        afterExit: (spec) => {
          if (spec.label !== 'candidate-3.attempt-1') return;
          const file = join(spec.outDir, 'candidate-3.attempt-1.tool-calls.jsonl.seal.json');
          const seal = JSON.parse(readFileSync(file, 'utf8')) as { record_count: number };
          seal.record_count += 1;
          writeFileSync(file, `${JSON.stringify(seal)}\n`);
        },
      },
    });
    const { taskId } = await d.submit();
    const task = await d.waitTerminal(taskId);
    expect(task.state).toBe('failed');
    expect(task.error.code).toBe('child_event_invalid');
    expect(task.error.message).toMatch(/^tool-call log invalid: audit completion seal record count mismatch \(seal \d+, log \d+\)$/);
    await expectNoCommit(taskId);
  });

  it('an evaluator answer that is not bare JSON gets exactly one repair: six stage runs', async () => {
    const roles: string[] = [];
    d = await startE2EDaemon({
      roster: builtinRoster({
        evaluator: wrapProvider(builtin(), async (req, inner) => {
          roles.push(req.role);
          const res = await inner.complete(req);
          // The first attempt wraps valid JSON in a fence → "JSON only" failure; the repair answers bare JSON.
          return req.role === 'evaluator' ? { ...res, content: `\`\`\`json\n${res.content}\n\`\`\`` } : res;
        }),
      }),
    });
    const { taskId } = await d.submit();
    const task = await d.waitTerminal(taskId);
    expect(task.error).toBeNull();
    expect(task.state).toBe('completed');
    expect(roles).toEqual(['evaluator', 'repair']);
    expect(await attemptsOf(taskId)).toEqual([
      'candidate-1#1:succeeded', 'candidate-2#1:succeeded', 'candidate-3#1:succeeded', 'evaluator#1:succeeded', 'merger#1:succeeded', 'repair#1:succeeded',
    ]);
    // The invalid first output is preserved in its attempt.
    const first = readFileSync(join(d.home, 'tasks', taskId, 'attempts', 'evaluator.attempt-1', 'answer.md'), 'utf8');
    expect(first.startsWith('```json\n')).toBe(true);
    const result = (await d.client.call('GET', `/v1/tasks/${taskId}/result`)) as Record<string, any>;
    expect(result.answer.present).toBe(true);
  });

  it('a repair that is invalid too fails the run with evaluation_invalid', async () => {
    d = await startE2EDaemon({
      roster: builtinRoster({
        evaluator: wrapProvider(builtin(), async (req, inner) => {
          const res = await inner.complete(req);
          return { ...res, content: `\`\`\`json\n${res.content}\n\`\`\`` };
        }),
      }),
    });
    const { taskId } = await d.submit();
    const task = await d.waitTerminal(taskId);
    expect(task.state).toBe('failed');
    expect(task.error.code).toBe('evaluation_invalid');
    expect(task.error.message.startsWith('evaluation schema repair failed: ')).toBe(true);
    expect(task.error.message).toMatch(/JSON only/);
    expect(task.error.state).toBe('evaluating');
    expect(await attemptsOf(taskId)).toEqual(['candidate-1#1:succeeded', 'candidate-2#1:succeeded', 'candidate-3#1:succeeded', 'evaluator#1:succeeded', 'repair#1:succeeded']);
    expect(await d.daemon.store.getCheckpoint(taskId, 'evaluation')).toBeNull();
    await expectNoCommit(taskId);
  });

  it('a candidate answer over 48 KiB after its one compression turn fails with child_output_cap, preserved whole', async () => {
    const first = `# Oversized\n\n${'The bucket refills in src/token-bucket.js. '.repeat(1300)}\n`;
    const second = `# Still oversized\n\n${'Refill adds elapsed seconds times the rate. '.repeat(1300)}\n`;
    expect(Buffer.byteLength(JSON.stringify(first))).toBeGreaterThan(OUTPUT_CAPS.candidateBytes);
    expect(Buffer.byteLength(JSON.stringify(second))).toBeGreaterThan(OUTPUT_CAPS.candidateBytes);
    const purposes: number[] = [];
    const oversized = wrapProvider(builtin('content-search'), async (req) => {
      purposes.push(req.tools.length);
      const content = req.tools.length > 0 ? first : second;
      return { content, toolCalls: [], stopReason: 'stop', usage: { inputTokens: 1, outputTokens: 1 }, model: 'test:oversized' };
    });
    d = await startE2EDaemon({ roster: builtinRoster({ candidates: { 1: oversized } }) });
    const { taskId } = await d.submit();
    const task = await d.waitTerminal(taskId);
    expect(task.state).toBe('failed');
    expect(task.error.code).toBe('child_output_cap');
    expect(task.error.message).toContain('candidate-1');
    // Exactly two model turns: the answer, then one tool-free compression turn.
    expect(purposes).toEqual([4, 0]);
    // The final (compressed, still oversized) answer is kept byte for byte in the attempt directory.
    const dir = join(d.home, 'tasks', taskId, 'attempts', 'candidate-1.attempt-1');
    expect(readFileSync(join(dir, 'answer.md'), 'utf8')).toBe(second);
    expect(JSON.parse(readFileSync(join(dir, 'result.json'), 'utf8'))).toMatchObject({ status: 'output_cap', compressed: true, answer_bytes: Buffer.byteLength(second), model_requests: 2 });
    const launch = d.launches.find((l) => l.label === 'candidate-1.attempt-1')!;
    expect(launch.exit).toMatchObject({ reason: 'exited', exitCode: 3 });
    expect(listAttemptDirs(d.home, taskId)).toContain('candidate-1.attempt-1.tar');
    await expectNoCommit(taskId);
    expect(ourSandboxProcesses()).toEqual([]);
  });

  it('a request whose canonical input is over budget fails preflight; nothing is created', async () => {
    let modelCalls = 0;
    const counting = wrapProvider(builtin(), (req, inner) => {
      modelCalls += 1;
      return inner.complete(req);
    });
    d = await startE2EDaemon({ roster: builtinRoster({ candidates: { 1: counting, 2: counting, 3: counting }, evaluator: counting, merger: counting }) });
    const paragraph = 'After a quiet period the /login route admits a burst of requests that the limiter should have refused. ';
    const background = Array.from({ length: 6000 }, () => paragraph); // ≈ 600 KB
    const reply = await d.client.raw('POST', '/v1/tasks/investigate', { arguments: { ...REFILL_ARGS, background }, repo: d.repo });
    expect(reply.status).toBe(422);
    const error = (reply.body as { error: { code: string; message: string; details: Record<string, unknown> } }).error;
    expect(error.code).toBe('prompt_budget_exceeded_forecast');
    expect(error.message).toMatch(/^Fusion prompt budget exceeded by \d+ tokens/);
    // The stage with the largest excess is named, and the remedy for it.
    const stage = /Primary blocking stage: (candidate|evaluator|repair|merger)\. Remediation: .+$/.exec(error.message)?.[1];
    expect(stage).toBeDefined();
    expect(error.details).toMatchObject({ blockingStage: stage });
    expect(error.details.stages).toContain('candidate');
    // Nothing exists: no task row, no task directory, no staging, no sandbox, no model call.
    expect(await d.daemon.store.listTasks({})).toEqual([]);
    expect(readdirSync(join(d.home, 'tasks'))).toEqual([]);
    // The run root is prepared (empty) at start-up; no attempt was staged in it.
    expect(readdirSync(d.runRoot)).toEqual([]);
    expect(d.launches).toEqual([]);
    expect(modelCalls).toBe(0);
    expect(ourSandboxProcesses()).toEqual([]);
    // The same daemon still accepts a normal request afterwards.
    const ok = await d.client.raw('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo: d.repo });
    expect(ok.status).toBe(202);
    await d.waitTerminal((ok.body as { taskId: string }).taskId);
  });
});
