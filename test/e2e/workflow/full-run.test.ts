/**
 * one complete Fusion investigate run through the real daemon, real bwrap
 * sandboxes and the builtin engine, over the fixture repository (a token-bucket rate limiter).
 */
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { dataBlockOf } from '../../../src/contracts/prompts.js';
import { SCHEMA } from '../../../src/contracts/constants.js';
import type { ModelRequest } from '../../../src/models/port.js';
import {
  RIGHT_FILE,
  builtin,
  builtinRoster,
  citationsOf,
  collapse,
  describeWithBwrap,
  ourSandboxProcesses,
  startE2EDaemon,
  wrapProvider,
  type E2EDaemon,
} from './helpers.js';

const sha256 = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

/** Strings that would identify a slot, model or provider to the blind stages. */
const IDENTIFYING = [
  'builtin:', 'content-search', 'path-search', 'definition-search', '"slot"', 'slot ',
  'candidate-1', 'candidate-2', 'candidate-3', '.attempt-', 'tool-calls.jsonl', '"model"', '"provider"',
];

describeWithBwrap('fusion workflow e2e: a full builtin run', () => {
  let d: E2EDaemon;
  const evaluatorRequests: ModelRequest[] = [];
  const mergerRequests: ModelRequest[] = [];
  let taskId: string;
  let task: Record<string, any>;

  beforeAll(async () => {
    d = await startE2EDaemon({
      roster: builtinRoster({
        evaluator: wrapProvider(builtin('content-search'), (req, inner) => {
          evaluatorRequests.push(req);
          return inner.complete(req);
        }),
        merger: wrapProvider(builtin('content-search'), (req, inner) => {
          mergerRequests.push(req);
          return inner.complete(req);
        }),
      }),
      // docs/behaviour.md#b5 vector: random bytes always 00 00 00 00 → {A:2, B:3, C:1}.
      workflow: { randomBytes4: () => Buffer.alloc(4) },
    });
    const receipt = await d.submit();
    taskId = receipt.taskId;
    expect(taskId).toMatch(/^investigate-[0-9a-f]{32}$/);
    expect(receipt.state).toBe('initializing');
    task = await d.waitTerminal(taskId);
  }, 120_000);

  afterAll(async () => {
    await d?.close();
  });

  it('completes, and bg_result delivers a verified answer', async () => {
    expect(task.error).toBeNull();
    expect(task.state).toBe('completed');
    const result = (await d.client.call('GET', `/v1/tasks/${taskId}/result`)) as Record<string, any>;
    expect(result).toMatchObject({ taskId, status: 'completed', state: 'completed', delivery: 'inline', engine: 'builtin' });
    const answerFile = join(d.home, 'tasks', taskId, 'result', 'answer.md');
    const bytes = readFileSync(answerFile);
    expect(result.answer).toMatchObject({ present: true, verified: true, bytes: bytes.length, sha256: sha256(bytes) });
    expect(result.answer.header).toBe(`Answer: ${bytes.length} bytes, sha256:${sha256(bytes)} (verified).`);
    expect(result.answer.text).toBe(bytes.toString('utf8'));
    // Usage is attached on the first retrieval only.
    expect(result.usage).toBeDefined();
    const again = (await d.client.call('GET', `/v1/tasks/${taskId}/result`)) as Record<string, any>;
    expect(again.usage).toBeUndefined();
    expect(again.answer.sha256).toBe(result.answer.sha256);
  });

  it('names the right file and cites real lines whose quotes match the fixture', async () => {
    const answer = readFileSync(join(d.home, 'tasks', taskId, 'result', 'answer.md'), 'utf8');
    expect(answer).toContain(RIGHT_FILE);
    const cited = citationsOf(answer);
    expect(cited.length).toBeGreaterThan(0);
    const inRightFile = cited.filter((c) => c.path === RIGHT_FILE);
    expect(inRightFile.length).toBeGreaterThan(0);
    // The first citation is the answer's headline finding.
    expect(cited[0]!.path).toBe(RIGHT_FILE);
    for (const c of cited) {
      const file = join(d.repo, c.path);
      expect(existsSync(file), `${c.path} exists`).toBe(true);
      const lines = readFileSync(file, 'utf8').split('\n');
      expect(c.line, `${c.path}:${c.line} within the file`).toBeLessThanOrEqual(lines.length);
      expect(c.quote, `${c.path}:${c.line} is quoted`).toBeDefined();
      expect(collapse(lines[c.line - 1]!), `${c.path}:${c.line}`).toBe(collapse(c.quote!));
    }
    // The refill itself is among the cited lines of the right file.
    const refill = readFileSync(join(d.repo, RIGHT_FILE), 'utf8').split('\n').findIndex((l) => l.includes('refill() {')) + 1;
    expect(inRightFile.map((c) => c.line)).toContain(refill);
  });

  it('records exactly five stage runs: three candidates, the evaluator and the merger', async () => {
    const attempts = await d.daemon.store.listAttempts(taskId);
    expect(attempts.map((a) => `${a.stage}#${a.attempt}:${a.status}`).sort()).toEqual([
      'candidate-1#1:succeeded', 'candidate-2#1:succeeded', 'candidate-3#1:succeeded', 'evaluator#1:succeeded', 'merger#1:succeeded',
    ]);
    for (const a of attempts) {
      expect(a.endedAt).not.toBeNull();
      expect(a.tarballPath).toBe(join(d.home, 'tasks', taskId, 'attempts', `${a.stage}.attempt-${a.attempt}.tar`));
    }
    // Three real sandboxes, one per candidate, all gone now, and one replay sandbox re-running the repository tool calls of all three.
    expect(d.launches.map((l) => l.label).sort()).toEqual(['candidate-1.attempt-1', 'candidate-2.attempt-1', 'candidate-3.attempt-1', 'candidates.replay']);
    for (const l of d.launches) expect(l.exit).toMatchObject({ reason: 'exited', exitCode: 0 });
    expect(ourSandboxProcesses()).toEqual([]);
    // Staging directories are removed after every attempt.
    expect(existsSync(d.runRoot) ? execFileSync('ls', ['-A', d.runRoot], { encoding: 'utf8' }) : '').toBe('');
  });

  it('keeps every candidate sealed log and seal, and the tarball digests match', async () => {
    const attempts = await d.daemon.store.listAttempts(taskId);
    const result = await d.daemon.store.getResult(taskId);
    const metadata = JSON.parse(result!.metadata) as { attempts: Array<{ stage: string; attempt: number; tarballPath: string; tarballSha256: string }> };
    expect(metadata.attempts.map((a) => a.stage).sort()).toEqual(['candidate-1', 'candidate-2', 'candidate-3', 'evaluator', 'merger']);
    for (const a of attempts) {
      const tar = readFileSync(a.tarballPath!);
      expect(sha256(tar), `${a.stage} tarball digest`).toBe(a.tarballSha256);
      expect(metadata.attempts.find((m) => m.stage === a.stage)).toEqual({ stage: a.stage, attempt: a.attempt, tarballPath: a.tarballPath, tarballSha256: a.tarballSha256 });
      if (!a.stage.startsWith('candidate-')) continue;
      const slot = a.stage.slice('candidate-'.length);
      const dir = join(d.home, 'tasks', taskId, 'attempts', `${a.stage}.attempt-1`);
      const logName = `candidate-${slot}.attempt-1.tool-calls.jsonl`;
      const log = readFileSync(join(dir, logName));
      const seal = JSON.parse(readFileSync(join(dir, `${logName}.seal.json`), 'utf8')) as Record<string, unknown>;
      const records = log.toString('utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, any>);
      expect(records.length).toBeGreaterThan(0);
      expect(seal).toEqual({
        schema_version: SCHEMA.toolCallSeal,
        status: 'complete',
        record_count: records.length,
        total_result_bytes: records.reduce((n, r) => n + (r.result_bytes as number), 0),
        log_sha256: sha256(log),
      });
      records.forEach((r, i) => {
        expect(r.ordinal).toBe(i);
        expect(['read', 'grep', 'find', 'ls']).toContain(r.tool_name);
      });
      // The tarball holds the very bytes of the log and the seal.
      const names = execFileSync('tar', ['-tf', a.tarballPath!], { encoding: 'utf8' }).trim().split('\n');
      expect(names).toEqual(expect.arrayContaining([logName, `${logName}.seal.json`, 'answer.md', 'result.json']));
      expect(execFileSync('tar', ['-xOf', a.tarballPath!, logName])).toEqual(log);
    }
  });

  it('persists the anonymisation map before evaluation (docs/behaviour.md#b5 vector)', async () => {
    const map = await d.daemon.store.getCheckpoint(taskId, 'anonymization');
    expect(JSON.parse(map!)).toEqual({ A: 2, B: 3, C: 1 });
    const result = await d.daemon.store.getResult(taskId);
    expect(JSON.parse(result!.metadata).anonymization).toEqual({ A: 2, B: 3, C: 1 });
    // The map was checkpointed before the evaluator started.
    const events = await d.daemon.store.listEvents(taskId, 0);
    const evaluatorStarted = events.find((e) => e.data.stage === 'evaluator' && e.data.event === 'started');
    const candidatesComplete = events.find((e) => e.kind === 'transition' && e.data.to === 'candidates_complete');
    expect(evaluatorStarted!.seq).toBeGreaterThan(candidatesComplete!.seq);
  });

  it('shows the evaluator only candidate ids A/B/C, responses and citation checks', async () => {
    expect(evaluatorRequests).toHaveLength(1);
    const req = evaluatorRequests[0]!;
    expect(req.role).toBe('evaluator');
    expect(req.tools).toEqual([]);
    const blind = dataBlockOf(req.messages[1]!.content) as Record<string, any>;
    expect(Object.keys(blind).sort()).toEqual(['candidates', 'canonical_input', 'citation_checks', 'schema_version']);
    expect(blind.schema_version).toBe(SCHEMA.blindCandidates);
    expect(blind.candidates.map((c: Record<string, unknown>) => Object.keys(c).sort())).toEqual([
      ['candidate_id', 'response'], ['candidate_id', 'response'], ['candidate_id', 'response'],
    ]);
    expect(blind.candidates.map((c: { candidate_id: string }) => c.candidate_id)).toEqual(['A', 'B', 'C']);
    expect(Object.keys(blind.citation_checks).sort()).toEqual(['A', 'B', 'C']);
    // The responses are the candidates' answers under the persisted map {A:2, B:3, C:1}.
    const answerOf = (slot: number): string => readFileSync(join(d.home, 'tasks', taskId, 'attempts', `candidate-${slot}.attempt-1`, 'answer.md'), 'utf8');
    expect(blind.candidates.map((c: { response: string }) => c.response)).toEqual([answerOf(2), answerOf(3), answerOf(1)]);
    // Ground truth: the fixture's citations check out.
    for (const id of ['A', 'B', 'C']) {
      const checks = blind.citation_checks[id] as Array<{ status: string }>;
      expect(checks.length).toBeGreaterThan(0);
      expect(checks.every((c) => c.status === 'verified')).toBe(true);
    }
    // Nothing identifies a slot, a model or a provider, anywhere in the request.
    const everything = JSON.stringify(req.messages);
    for (const word of IDENTIFYING) expect(everything, `evaluator request mentions ${word}`).not.toContain(word);
  });

  it('shows the merger the same blind candidates and the evaluation, and nothing identifying', async () => {
    expect(mergerRequests).toHaveLength(1);
    const merge = dataBlockOf(mergerRequests[0]!.messages[1]!.content) as Record<string, any>;
    expect(Object.keys(merge).sort()).toEqual(['candidates', 'canonical_input', 'citation_checks', 'evaluation', 'schema_version']);
    // The merger sees each candidate's citation checks (without the file text), keyed by id only.
    expect(Object.keys(merge.citation_checks).sort()).toEqual(['A', 'B', 'C']);
    for (const checks of Object.values(merge.citation_checks) as Array<Array<Record<string, unknown>>>) for (const c of checks) expect(c.actual).toBeUndefined();
    expect(merge.schema_version).toBe(SCHEMA.mergeInput);
    expect(merge.candidates.map((c: { candidate_id: string }) => c.candidate_id)).toEqual(['A', 'B', 'C']);
    expect(merge.evaluation.schema_version).toBe(SCHEMA.evaluation);
    const everything = JSON.stringify(mergerRequests[0]!.messages);
    for (const word of IDENTIFYING) expect(everything, `merger request mentions ${word}`).not.toContain(word);
  });
});
