import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'node:http';
import { INVESTIGATE_ARGS, ROOT, startStubDaemon, stopDaemon, tempHome, type DaemonProc } from './helpers.js';
import { LATEST_SCHEMA_VERSION } from '../../../src/store/migrations.js';

type Json = Record<string, any>;

describe('socket API against a real daemon process', () => {
  let d: DaemonProc;
  beforeAll(async () => {
    d = await startStubDaemon(tempHome(), 40);
  });
  afterAll(async () => {
    if (d) await stopDaemon(d);
  });

  it('creates the data dir 0700 and the socket 0600', () => {
    expect(statSync(d.home).mode & 0o777).toBe(0o700);
    expect(statSync(d.socket).mode & 0o777).toBe(0o600);
    expect(statSync(d.socket).isSocket()).toBe(true);
  });

  it('answers health', async () => {
    const r = (await d.client.call('GET', '/v1/health')) as Json;
    expect(r.ok).toBe(true);
    // The database, the sandbox backend (and its image under Docker), the providers, the queue.
    expect(r.database).toMatchObject({ ok: true, journalMode: 'wal', schemaVersion: LATEST_SCHEMA_VERSION });
    expect(r.sandbox).toHaveProperty('ok');
    expect(r).toHaveProperty('sandboxImage');
    expect(r.providers).toMatchObject({ candidates: expect.any(Array) });
    expect(r.queue).toMatchObject({ depth: expect.any(Number), running: expect.any(Number) });
  });

  it('serves Prometheus metrics, including the sealed task tarballs', async () => {
    const { taskId } = (await d.client.call('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: ROOT })) as Json;
    await d.client.call('GET', `/v1/tasks/${taskId}/wait?timeoutMs=20000`);
    const text = await new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
      const req = request({ socketPath: d.socket, path: '/metrics', method: 'GET' }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }));
      });
      req.on('error', reject);
      req.end();
    });
    expect(text.status).toBe(200);
    expect(text.type).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(text.body).toMatch(/^fusion_tasks\{state="completed"\} [1-9]\d*$/m);
    expect(text.body).toMatch(/^fusion_tasks\{state="evaluating"\} 0$/m);
    expect(text.body).toMatch(/^fusion_task_tarball_bytes_total [1-9]\d*$/m);
    expect(text.body).toMatch(/^# TYPE fusion_stage_duration_seconds histogram$/m);
    for (const name of ['fusion_sandbox_launches_total', 'fusion_sandbox_failures_total', 'fusion_egress_decisions_total', 'fusion_replay_mismatches_total', 'fusion_replay_inconclusive_total']) {
      expect(text.body).toContain(`# TYPE ${name} counter`);
    }
  });

  it('issues a receipt with the docs/behaviour.md#f1 text, then runs to completion with every transition streamed', async () => {
    const reply = await d.client.raw('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: ROOT });
    expect(reply.status).toBe(202);
    const receipt = reply.body as Json;
    expect(receipt.taskId).toMatch(/^investigate-[0-9a-f]{32}$/);
    expect(receipt.state).toBe('initializing');
    expect(receipt.text).toBe(
      [
        `Started fusion investigate in the background (${receipt.taskId}).`,
        'The workflow passed durable preflight and no longer blocks this tool call.',
        `Wait for the terminal notification, then call bg_result({taskId:"${receipt.taskId}"}). Do not poll.`,
      ].join('\n'),
    );
    const events: Json[] = [];
    for await (const e of d.client.events(receipt.taskId)) events.push(e);
    const transitions = events.filter((e) => e.kind === 'transition').map((e) => e.data.to);
    expect(transitions).toEqual(['initializing', 'candidates_running', 'candidates_complete', 'evaluating', 'evaluation_complete', 'merging', 'completed']);
    const terminal = events.at(-1)!;
    expect(terminal.kind).toBe('terminal');
    expect(terminal.data).toMatchObject({ taskId: receipt.taskId, name: 'investigate', status: 'completed', error: null });
    expect(typeof terminal.data.summary).toBe('string');

    const first = (await d.client.call('GET', `/v1/tasks/${receipt.taskId}/result`)) as Json;
    expect(first.delivery).toBe('inline');
    expect(first.answer.present).toBe(true);
    expect(first.answer.header).toMatch(/^Answer: \d+ bytes, sha256:[0-9a-f]{64} \(verified\)\.$/);
    expect(first.usage).toEqual({ entries: [], totals: { inputTokens: 0, outputTokens: 0, requests: 3 } });
    const second = (await d.client.call('GET', `/v1/tasks/${receipt.taskId}/result`)) as Json;
    expect(second.usage).toBeUndefined();
    expect(second.answer.text).toBe(first.answer.text);
  });

  it('bg_result never blocks: a running task answers running/none', async () => {
    const slow = await startStubDaemon(tempHome(), 2_000);
    try {
      const receipt = (await slow.client.call('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: ROOT })) as Json;
      const started = Date.now();
      const r = (await slow.client.call('GET', `/v1/tasks/${receipt.taskId}/result`)) as Json;
      expect(Date.now() - started).toBeLessThan(1_000);
      expect(r).toMatchObject({ state: 'running', delivery: 'none' });
      const w = (await slow.client.call('GET', `/v1/tasks/${receipt.taskId}/wait?timeoutMs=100`)) as Json;
      expect(w.terminal).toBe(false);
      const cancelled = (await slow.client.call('POST', `/v1/tasks/${receipt.taskId}/cancel`)) as Json;
      expect(cancelled.state).toBe('cancelled');
      const after = (await slow.client.call('GET', `/v1/tasks/${receipt.taskId}/result`)) as Json;
      expect(after).toMatchObject({ status: 'cancelled', delivery: 'none', answer: { present: false, reason: 'run_did_not_commit' } });
      expect(after.answer.text).toBeUndefined();
      // Cancelling a terminal task returns it as it is.
      const again = (await slow.client.call('POST', `/v1/tasks/${receipt.taskId}/cancel`)) as Json;
      expect(again.state).toBe('cancelled');
    } finally {
      await stopDaemon(slow);
    }
  });

  it('rejects malformed input with the exact message and creates nothing (docs/behaviour.md#a8)', async () => {
    const before = readdirSync(join(d.home, 'tasks')).length;
    const tasksBefore = ((await d.client.call('GET', '/v1/tasks')) as Json).tasks.length;
    const reply = await d.client.raw('POST', '/v1/tasks/investigate', { arguments: { objective: 'x', background: [], deliverable: 'y', mode: 'fast' }, repo: ROOT });
    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({ error: { code: 'invalid_input', message: 'fusion_investigate contains unsupported key(s): mode', details: expect.any(Object) } });
    const research = await d.client.raw('POST', '/v1/tasks/research', { arguments: { ...INVESTIGATE_ARGS, sources: [{ url: 'http://127.1/', purpose: 'p' }] }, repo: ROOT });
    expect(research.status).toBe(400);
    expect((research.body as Json).error.message).toContain('fusion_research.sources[0].url must be a declared public http(s) URL');
    expect(readdirSync(join(d.home, 'tasks')).length).toBe(before);
    expect(((await d.client.call('GET', '/v1/tasks')) as Json).tasks.length).toBe(tasksBefore);
  });

  it('reports bad bodies, routes and methods in the one envelope', async () => {
    const notRepo = await d.client.raw('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: 'relative/path' });
    expect(notRepo.status).toBe(400);
    expect((notRepo.body as Json).error.message).toContain('repo must be an absolute directory path');
    const extra = await d.client.raw('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: ROOT, priority: 1 });
    expect(extra.status).toBe(400);
    expect((extra.body as Json).error.code).toBe('invalid_input');
    const missing = await d.client.raw('GET', '/v1/tasks/investigate-00000000000000000000000000000000');
    expect(missing.status).toBe(404);
    expect((missing.body as Json).error.code).toBe('not_found');
    const method = await d.client.raw('DELETE', '/v1/tasks');
    expect(method.status).toBe(405);
    const nowhere = await d.client.raw('GET', '/v2/x');
    expect(nowhere.status).toBe(404);
  });

  it('refuses a corrupted answer with artifact_error', async () => {
    const receipt = (await d.client.call('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: ROOT })) as Json;
    await d.client.call('GET', `/v1/tasks/${receipt.taskId}/wait?timeoutMs=20000`);
    const answerFile = join(d.home, 'tasks', receipt.taskId, 'result', 'answer.md');
    expect(existsSync(answerFile)).toBe(true);
    writeFileSync(answerFile, 'tampered\n');
    const r = await d.client.raw('GET', `/v1/tasks/${receipt.taskId}/result`);
    expect(r.status).toBe(500);
    expect((r.body as Json).error.code).toBe('artifact_error');
    expect((r.body as Json).error.message).toMatch(/^fusion committed result invalid: /);
  });

  it('delivers a large answer by reference and refuses inline without truncating', async () => {
    const big = await startStubDaemon(tempHome(), 10, 60_000);
    try {
      const receipt = (await big.client.call('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: ROOT })) as Json;
      await big.client.call('GET', `/v1/tasks/${receipt.taskId}/wait?timeoutMs=20000`);
      const auto = (await big.client.call('GET', `/v1/tasks/${receipt.taskId}/result`)) as Json;
      expect(auto.delivery).toBe('artifact');
      expect(auto.answer.bytes).toBe(60_001);
      expect(existsSync(auto.answer.path)).toBe(true);
      const inline = await big.client.raw('GET', `/v1/tasks/${receipt.taskId}/result?delivery=inline`);
      expect((inline.body as Json).error.message).toContain('above the 49152-byte inline limit. Use delivery:"artifact"; nothing was truncated.');
      // The bytes themselves, for a caller who cannot open the path: verified, whole, digest in a header.
      const bytes = await big.client.answer(receipt.taskId, auto.answer.sha256);
      expect(bytes.length).toBe(60_001);
      expect(bytes.equals(readFileSync(auto.answer.path))).toBe(true);
      await expect(big.client.answer(receipt.taskId, '0'.repeat(64))).rejects.toMatchObject({ code: 'artifact_error' });
      writeFileSync(auto.answer.path, 'tampered\n');
      const tampered = await big.client.raw('GET', `/v1/tasks/${receipt.taskId}/answer`);
      expect({ status: tampered.status, code: (tampered.body as Json).error.code }).toEqual({ status: 500, code: 'artifact_error' });
    } finally {
      await stopDaemon(big);
    }
  });

  it('refuses to start a second daemon on a live socket', async () => {
    // Another data directory, the same socket: the socket's own check.
    await expect(startStubDaemon(tempHome(), 10, 0, { socketPath: d.socket })).rejects.toThrow(/another daemon already answers/);
  });

  it('refuses a second daemon on the same data directory, naming the first (another socket does not help)', async () => {
    const pid = d.proc.pid!;
    await expect(startStubDaemon(d.home, 10, 0, { socketPath: join(tempHome(), 'other.sock') })).rejects.toThrow(
      `data directory ${d.home} is in use by the fusion daemon pid ${pid} (socket ${d.socket}`,
    );
    // The first one still answers.
    expect(((await d.client.call('GET', '/v1/health')) as Json).ok).toBe(true);
  });
});
