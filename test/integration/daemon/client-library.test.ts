/**
 * FusionClient against real daemons: the typed task API over the socket (receipt, events as an
 * async iterator, wait with a timeout, status, result, cancel), errors carrying the daemon's
 * codes, the research-run API over the socket and over the TCP listener with a workspace key,
 * and the package entry point (`fusion-supervisor` resolves to the built client).
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FusionClient, FusionError, type TaskEvent } from '../../../src/client/index.js';
import { dataPaths } from '../../../src/tasks/paths.js';
import { waitFor } from '../../helpers/wait.js';
import { INVESTIGATE_ARGS, ROOT, startStubDaemon, stopDaemon, tempHome, type DaemonProc } from './helpers.js';
import { createKey, ORIGIN_HOST, startResearchDaemon, type ResearchDaemon } from '../research/helpers.js';
import { startHttpOrigin, type Listener } from '../egress/origin.js';

async function rejection(p: Promise<unknown>): Promise<FusionError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(FusionError);
  return err as FusionError;
}

describe('FusionClient (task API over the socket)', () => {
  let d: DaemonProc;
  let client: FusionClient;
  beforeAll(async () => {
    d = await startStubDaemon(tempHome(), 150);
    client = new FusionClient({ socketPath: d.socket });
  });
  afterAll(async () => {
    if (d) await stopDaemon(d);
  });

  it('submits, follows the events to the terminal one, and reads the verified result', async () => {
    const receipt = await client.investigate(INVESTIGATE_ARGS, { repo: ROOT });
    expect(receipt.taskId).toMatch(/^investigate-/);
    expect(receipt.text).toContain(receipt.taskId);
    const early = await client.wait(receipt.taskId, { timeoutMs: 10 });
    expect(early.terminal).toBe(false);
    const events: TaskEvent[] = [];
    for await (const e of client.events(receipt.taskId)) events.push(e);
    expect(events.filter((e) => e.kind === 'transition').map((e) => e.data.to)).toEqual(['initializing', 'candidates_running', 'candidates_complete', 'evaluating', 'evaluation_complete', 'merging', 'completed']);
    expect(events.at(-1)?.kind).toBe('terminal');
    const done = await client.wait(receipt.taskId, { timeoutMs: 5_000 });
    expect(done).toMatchObject({ terminal: true, task: { taskId: receipt.taskId, status: 'completed' }, notification: { taskId: receipt.taskId, status: 'completed' } });
    expect((await client.status(receipt.taskId)).state).toBe('completed');
    const result = await client.result(receipt.taskId, { delivery: 'inline' });
    expect(result.answer.present).toBe(true);
    if (result.answer.present) expect(result.answer.text).toBe(`stub answer for ${receipt.taskId}\n`);
    // Replay only: the history after a cursor, then the end.
    const after = events.at(-3)!.seq;
    const tail: TaskEvent[] = [];
    for await (const e of client.events(receipt.taskId, { after, follow: false })) tail.push(e);
    expect(tail.map((e) => e.seq)).toEqual(events.slice(-2).map((e) => e.seq));
  });

  it('stops following when the caller breaks out or aborts, and cancels a running task', async () => {
    const receipt = await client.investigate(INVESTIGATE_ARGS, { repo: ROOT });
    for await (const e of client.events(receipt.taskId)) {
      expect(e.taskId).toBe(receipt.taskId);
      break;
    }
    const abort = new AbortController();
    const seen: TaskEvent[] = [];
    const following = (async () => {
      for await (const e of client.events(receipt.taskId, { signal: abort.signal })) seen.push(e);
    })();
    abort.abort();
    await following;
    const cancelled = await client.cancel(receipt.taskId);
    expect(cancelled).toMatchObject({ taskId: receipt.taskId, status: 'cancelled' });
    const result = await client.result(receipt.taskId);
    expect(result).toMatchObject({ status: 'cancelled', answer: { present: false } });
  });

  it('errors carry the daemon codes and exact messages', async () => {
    const invalid = await rejection(client.investigate({ objective: 'x' }, { repo: ROOT }));
    expect([invalid.code, invalid.message]).toEqual(['invalid_input', 'fusion_investigate missing required key(s): background, deliverable']);
    expect(invalid.details).toMatchObject({ tool: 'fusion_investigate' });
    expect((await rejection(client.status('investigate-00000000000000000000000000000000'))).code).toBe('not_found');
    expect((await rejection(client.events('investigate-00000000000000000000000000000000').next())).code).toBe('not_found');
    expect((await rejection(client.result('x', { delivery: 'bulk' as 'auto' }))).message).toBe('delivery must be one of auto, inline, artifact, got "bulk"');
    const nobody = new FusionClient({ socketPath: join(tempHome(), 'none.sock') });
    expect(await nobody.ping()).toBe(false);
    const down = await rejection(nobody.status('x'));
    expect(down.code).toBe('daemon_unavailable');
    expect(down.message).toContain('none.sock');
  });

  it('the socket default follows FUSION_SOCKET, then FUSION_HOME', () => {
    expect(new FusionClient({ env: { FUSION_SOCKET: '/tmp/x/f.sock' } }).socketPath).toBe('/tmp/x/f.sock');
    expect(new FusionClient({ env: { FUSION_HOME: '/tmp/fh' } }).socketPath).toBe(dataPaths('/tmp/fh').defaultSocket);
  });

  it("is the package's entry point: import('fusion-supervisor') from inside the package", () => {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', "const m = await import('fusion-supervisor'); console.log(typeof m.FusionClient, typeof m.FusionError, m.ERROR_CODES.not_found.httpStatus)"], { cwd: ROOT, encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('function function 404');
  });
});

describe('FusionClient (research-run API)', () => {
  let d: ResearchDaemon;
  let key: string;
  let origin: Listener;
  beforeAll(async () => {
    origin = await startHttpOrigin((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<html><body><p>research page</p></body></html>');
    });
    d = await startResearchDaemon();
    key = await createKey(d.daemon.researchDbFile, 'ws_client');
  });
  afterAll(async () => {
    await d?.close();
    await origin?.close();
  });

  it.each(['socket', 'tcp'] as const)('creates, deduplicates, reads and documents a run over the %s', async (via) => {
    const client = via === 'socket' ? new FusionClient({ socketPath: d.daemon.socketPath, apiKey: key }) : new FusionClient({ socketPath: join(d.home, 'unused.sock'), researchUrl: d.base, apiKey: key });
    const body = { query: `client ${via}`, sourceUrls: [`http://${ORIGIN_HOST}:${origin.port}/${via}`], limits: { maxDepth: 0 } };
    const created = await client.createRun(body, { idempotencyKey: `client-${via}` });
    expect(created).toMatchObject({ deduplicated: false, run: { workspaceId: 'ws_client', query: body.query } });
    const again = await client.createRun(body, { idempotencyKey: `client-${via}` });
    expect(again).toMatchObject({ deduplicated: true, run: { id: created.run.id } });
    const run = await waitFor('the run to end', async () => {
      const now = await client.getRun(created.run.id);
      return now.status === 'queued' || now.status === 'running' ? false : now;
    }, 20_000, 25);
    expect(run.status).toBe('succeeded');
    expect((await client.document(run.id)).runId).toBe(run.id);
    expect((await client.snapshots(run.id)).length).toBeGreaterThan(0);
    expect((await rejection(client.getRun(run.id, { apiKey: 'fsk_wrong' }))).code).toBe('unauthorized');
    expect((await rejection(client.createRun({ ...body, query: 'other' }, { idempotencyKey: `client-${via}` }))).code).toBe('conflict');
    expect((await rejection(new FusionClient({ socketPath: d.daemon.socketPath }).getRun(run.id))).code).toBe('unauthorized');
  });
});
