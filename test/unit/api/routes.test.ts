/**
 * The socket API's routes over an in-process HTTP server on a temporary Unix socket, with the
 * task service on fakes of its ports (in-memory store, a runner that commits at once). No daemon.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, request, type Server } from 'node:http';
import { join } from 'node:path';
import { silentLogger } from '../../../src/log.js';
import { createApiHandler, type ApiSurface } from '../../../src/api/routes.js';
import { blockingRunner, completingRunner, INVESTIGATE_ARGS, makeDirs, makeService, type Dirs, type Harness } from '../fakes/task-fixtures.js';
import type { TaskRunner } from '../../../src/tasks/runner-port.js';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

let dirs: Dirs;
const servers: Server[] = [];

async function serve(runner: TaskRunner, surface: ApiSurface = 'socket'): Promise<{ call: (method: string, path: string, body?: unknown, raw?: string) => Promise<Reply>; h: Harness }> {
  const h = makeService(dirs, runner);
  const handler = createApiHandler({ tasks: h.service, log: silentLogger(), version: '9.9.9', startedAt: '2026-01-01T00:00:00.000Z', sandbox: async () => ({ backend: 'fake' }) }, surface);
  const socketPath = join(dirs.base, `api-${servers.length}.sock`);
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(socketPath, r));
  const call = (method: string, path: string, body?: unknown, raw?: string): Promise<Reply> =>
    new Promise((resolve, reject) => {
      const text = raw ?? (body === undefined ? undefined : JSON.stringify(body));
      const req = request({ socketPath, method, path, headers: text === undefined ? {} : { 'content-type': 'application/json' } }, (res) => {
        let data = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (data += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: data === '' ? null : JSON.parse(data) }));
      });
      req.on('error', reject);
      req.end(text);
    });
  return { call, h };
}

beforeAll(() => {
  dirs = makeDirs();
});
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  dirs.remove();
});

describe('socket routes', () => {
  it('GET /v1/health answers the version and the sandbox facts', async () => {
    const { call } = await serve(completingRunner(dirs));
    const reply = await call('GET', '/v1/health');
    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({ ok: true, version: '9.9.9', sandbox: { backend: 'fake' } });
  });

  it('submit → 202 receipt; status, wait and result follow the task to its verified answer', async () => {
    const { call } = await serve(completingRunner(dirs, 'Routed answer.\n'));
    const receipt = await call('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    expect(receipt.status).toBe(202);
    const taskId = receipt.body.taskId as string;
    expect(taskId).toMatch(/^investigate-/);
    const waited = await call('GET', `/v1/tasks/${taskId}/wait?timeoutMs=5000`);
    expect(waited.status).toBe(200);
    expect(JSON.stringify(waited.body)).toContain('completed');
    const status = await call('GET', `/v1/tasks/${taskId}`);
    expect(status.body).toMatchObject({ taskId, state: 'completed', status: 'completed' });
    const result = await call('GET', `/v1/tasks/${taskId}/result`);
    expect(result.body).toMatchObject({ taskId, delivery: 'inline', answer: { present: true, verified: true, text: 'Routed answer.\n' } });
    const list = await call('GET', '/v1/tasks?state=completed');
    expect(JSON.stringify(list.body)).toContain(taskId);
  });

  it('cancel answers the cancelled task', async () => {
    const runner = blockingRunner();
    const { call } = await serve(runner);
    const receipt = await call('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await runner.started;
    const cancelled = await call('POST', `/v1/tasks/${receipt.body.taskId}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(JSON.stringify(cancelled.body)).toContain('cancelled');
  });

  it('every error is the one envelope with the registry status', async () => {
    const { call } = await serve(completingRunner(dirs));
    const cases: Array<[Reply, number, string]> = [
      [await call('GET', '/v1/nowhere'), 404, 'not_found'],
      [await call('GET', '/v1/tasks/investigate-unknown'), 404, 'not_found'],
      [await call('DELETE', '/v1/health'), 405, 'method_not_allowed'],
      [await call('POST', '/v1/tasks/investigate', undefined, '{"arguments":'), 400, 'invalid_input'],
      [await call('POST', '/v1/tasks/investigate', { arguments: { objective: '' }, repo: dirs.repo }), 400, 'invalid_input'],
      [await call('GET', '/v1/tasks?state=nonsense'), 400, 'invalid_input'],
    ];
    for (const [reply, status, code] of cases) {
      expect(reply.status, JSON.stringify(reply.body)).toBe(status);
      expect(reply.body.error).toMatchObject({ code });
      expect(typeof reply.body.error.message).toBe('string');
    }
  });
});

describe('TCP surface', () => {
  it('serves health but never the task API', async () => {
    const { call } = await serve(completingRunner(dirs), 'tcp');
    expect((await call('GET', '/v1/health')).body).toMatchObject({ ok: true, version: '9.9.9' });
    const tasks = await call('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    expect(tasks.status).toBe(404);
    expect(tasks.body.error.code).toBe('not_found');
  });
});
