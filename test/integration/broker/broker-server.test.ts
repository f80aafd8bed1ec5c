import { createHash } from 'node:crypto';
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createBrokerClient, type BrokerClient } from '../../../sandbox/broker-client.js';
import { redactSecrets } from '../../../src/contracts/secret-redaction.js';
import { BROKER_MESSAGES, startBroker, type BrokerFetcher, type BrokerHandle, type BrokerOptions } from '../../../src/broker/broker-server.js';
import type { FetchRequest, ModelTurnRequest } from '../../../src/contracts/broker-protocol.js';
import { brokerRecordSchema, type ToolCallLogRecord } from '../../../src/contracts/broker-record.js';
import { webFetchResultText } from '../../../src/contracts/web-fetch-result.js';
import { RESEARCH_FETCH_TOOL, SCHEMA } from '../../../src/contracts/constants.js';
import { crossCheckBrokerRecord, crossCheckConversation } from '../../../src/audit/cross-check.js';
import { FusionError } from '../../../src/errors.js';
import { silentLogger } from '../../../src/log.js';
import type { ModelProvider, ModelRequest, ModelResponse } from '../../../src/models/port.js';
import { DECLARED_URL, tempDir } from './fixtures.js';

const SECRET = 'sk-test-0123456789abcdefSECRET';
const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

/** A provider holding a credential, as the real adapters do. */
class FakeProvider implements ModelProvider {
  readonly id = 'fake:model-x';
  readonly engine = 'fake';
  readonly seen: ModelRequest[] = [];
  private readonly apiKey = SECRET;
  fail: Error | undefined;

  complete(req: ModelRequest): Promise<ModelResponse> {
    this.seen.push(req);
    if (this.fail !== undefined) return Promise.reject(this.fail);
    const wantsTool = req.tools.length > 0 && this.seen.length === 1;
    return Promise.resolve({
      content: wantsTool ? '' : `answer ${String(this.seen.length)} (${this.apiKey.length > 0 ? 'keyed' : 'unkeyed'})`,
      toolCalls: wantsTool ? [{ id: 'c1', name: 'ls', arguments: '{}' }] : [],
      stopReason: wantsTool ? 'tool_calls' : 'stop',
      usage: { inputTokens: 100, outputTokens: 7 },
      model: 'model-x',
    });
  }
}

const TURN: ModelTurnRequest = {
  messages: [{ role: 'user', content: 'hi' }],
  tools: [{ name: 'ls', description: 'list', parameters: { type: 'object', properties: {} } }],
};

const PAGE = 'page body';

let root: string;
let cleanup: () => void;
let socketPath: string;
let broker: BrokerHandle | undefined;
let client: BrokerClient;
let provider: FakeProvider;
let activity: number;

beforeEach(() => {
  ({ dir: root, cleanup } = tempDir('fusion-broker-'));
  socketPath = join(root, 'broker.sock');
  client = createBrokerClient({ socketPath });
  provider = new FakeProvider();
  activity = 0;
});
afterEach(async () => {
  await broker?.close();
  broker = undefined;
  cleanup();
});

async function start(overrides: Partial<BrokerOptions> = {}): Promise<BrokerHandle> {
  broker = await startBroker({
    socketPath,
    provider,
    role: 'candidate',
    taskId: 'research-0123456789abcdef0123456789abcdef',
    declaredUrls: [DECLARED_URL],
    onActivity: () => {
      activity += 1;
    },
    log: silentLogger(),
    ...overrides,
  });
  return broker;
}

function rawPost(path: string, body: string, method = 'POST'): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ socketPath, path, method, headers: { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('startBroker', () => {
  it('listens on a 0600 Unix socket and removes it on close', async () => {
    const handle = await start();
    const st = statSync(socketPath);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    await handle.close();
    expect(existsSync(socketPath)).toBe(false);
  });

  it('refuses to replace a file that is not a socket', async () => {
    writeFileSync(socketPath, 'not a socket');
    await expect(start()).rejects.toMatchObject({ code: 'launch_failed' });
  });

  it('forwards model turns, records them and sums usage without leaking the provider', async () => {
    const handle = await start({ maxOutputTokens: 1234 });
    const first = await client.modelTurn(TURN);
    expect(first).toEqual({
      message: { role: 'assistant', content: '', tool_calls: [{ id: 'c1', name: 'ls', arguments: '{}' }] },
      stop_reason: 'tool_calls',
      usage: { input_tokens: 100, output_tokens: 7 },
    });
    const second = await client.modelTurn({ ...TURN, purpose: 'compress' });
    expect(second.message.content).toBe('answer 2 (keyed)');

    expect(provider.seen[0]).toMatchObject({ role: 'candidate', taskId: 'research-0123456789abcdef0123456789abcdef', maxOutputTokens: 1234 });
    expect(provider.seen[0]?.tools.map((t) => t.name)).toEqual(['ls']);
    // The compression turn is tool-free whatever the child sent.
    expect(provider.seen[1]?.tools).toEqual([]);

    expect(handle.usage).toEqual({ inputTokens: 200, outputTokens: 14, requests: 2 });
    expect(handle.records).toHaveLength(2);
    for (const record of handle.records) expect(brokerRecordSchema.safeParse(record).success).toBe(true);
    expect(handle.records[0]).toMatchObject({ kind: 'model', ordinal: 0, ok: true, toolCallsRequested: 1 });
    expect(handle.records[1]).toMatchObject({ kind: 'model', ordinal: 1, ok: true, toolCallsRequested: 0 });
    const text = JSON.stringify([first, second, handle.records]);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain('model-x');
    expect(activity).toBeGreaterThanOrEqual(2);
  });

  it('refuses model request 551 with child_limit_exceeded', async () => {
    const handle = await start({ provider: { id: 'p', engine: 'fake', complete: () => Promise.resolve({ content: 'ok', toolCalls: [], stopReason: 'stop', usage: { inputTokens: 1, outputTokens: 2 }, model: 'm' }) } });
    for (let i = 0; i < 550; i += 1) await client.modelTurn(TURN);
    await expect(client.modelTurn(TURN)).rejects.toMatchObject({
      code: 'child_limit_exceeded',
      httpStatus: 429,
      message: 'fusion child reached model request 551, exceeding the 550-request limit',
    });
    await expect(client.modelTurn(TURN)).rejects.toMatchObject({ code: 'child_limit_exceeded' });
    expect(handle.usage).toEqual({ inputTokens: 550, outputTokens: 1100, requests: 550 });
    // The first refusal is recorded; later ones are not, so the record stays bounded.
    expect(handle.records).toHaveLength(551);
    expect(handle.records[550]).toMatchObject({ kind: 'model', ordinal: 550, ok: false });
    expect(handle.records.slice(0, 550).every((r) => r.ok)).toBe(true);
  });

  it('rejects malformed bodies with invalid_input and unknown routes with not_found', async () => {
    await start();
    const extra = await rawPost('/v1/model', JSON.stringify({ ...TURN, model: 'gpt-big' }));
    expect(extra.status).toBe(400);
    expect(extra.body).toMatchObject({ error: { code: 'invalid_input' } });
    expect(JSON.stringify(extra.body)).toContain('model');
    const notJson = await rawPost('/v1/model', '{');
    expect(notJson.body).toMatchObject({ error: { code: 'invalid_input', message: 'model turn body is not valid JSON' } });
    expect((await rawPost('/v1/nope', '{}')).status).toBe(404);
    expect((await rawPost('/v1/model', '', 'GET')).status).toBe(405);
    expect(provider.seen).toHaveLength(0);
  });

  it('keeps serving after a child hangs up mid-body', async () => {
    await start();
    await new Promise<void>((resolve) => {
      const req = httpRequest({ socketPath, path: '/v1/model', method: 'POST', headers: { 'content-length': '1000' } });
      req.on('error', () => resolve());
      req.write('{"messages":');
      // The hang-up mid-body is the subject: it comes a moment after the body began.
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 50);
    });
    const answer = await client.modelTurn({ ...TURN, tools: [] });
    expect(answer.stop_reason).toBe('stop');
  });

  it('maps provider failures to their code and redacts credentials', async () => {
    const handle = await start();
    provider.fail = new FusionError('model_error', `upstream 401 for Authorization: Bearer ${SECRET}`);
    const err: unknown = await client.modelTurn(TURN).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'model_error', httpStatus: 502 });
    expect((err as Error).message).not.toContain(SECRET);
    provider.fail = new Error(`socket hang up key=${SECRET}`);
    const plain: unknown = await client.modelTurn(TURN).catch((e: unknown) => e);
    expect(plain).toMatchObject({ code: 'model_error' });
    expect((plain as Error).message).not.toContain(SECRET);
    expect(handle.records.map((r) => r.ok)).toEqual([false, false]);
    expect(handle.usage.requests).toBe(2);
  });

  it('redactSecrets removes bearer tokens, sk- keys and key=value secrets', () => {
    expect(redactSecrets('Authorization: Bearer abcdefghijklmnop')).not.toContain('abcdefghijklmnop');
    expect(redactSecrets(`x ${SECRET} y`)).not.toContain(SECRET);
    expect(redactSecrets('api_key="hunter2hunter2"')).not.toContain('hunter2');
    expect(redactSecrets('plain text stays')).toBe('plain text stays');
  });

  describe('/v1/fetch', () => {
    const okFetcher: BrokerFetcher = (req: FetchRequest) =>
      Promise.resolve({
        ok: true,
        result: {
          url: req.url,
          final_url: `${req.url}/`,
          status: 200,
          content_type: 'text/plain',
          format: 'text',
          truncated: false,
          content: PAGE,
          response_bytes: PAGE.length,
          content_sha256: sha256(PAGE),
        },
      });

    it('is refused when no fetcher is configured', async () => {
      const handle = await start();
      await expect(client.fetch({ url: DECLARED_URL })).rejects.toMatchObject({ code: 'forbidden', message: BROKER_MESSAGES.fetchUnavailable });
      expect(handle.records).toEqual([
        expect.objectContaining({ kind: 'fetch', ok: false, error_code: 'fetch_unavailable', rejected_url_sha256: sha256(DECLARED_URL) }),
      ]);
    });

    it('fetches a declared url and records its provenance', async () => {
      const seen: FetchRequest[] = [];
      const handle = await start({
        fetcher: (req, signal) => {
          seen.push(req);
          return okFetcher(req, signal);
        },
      });
      const res = await client.fetch({ url: DECLARED_URL, extract: 'text' });
      expect(res.ok).toBe(true);
      expect(seen).toEqual([{ url: DECLARED_URL, extract: 'text' }]);
      expect(handle.records).toHaveLength(1);
      expect(handle.records[0]).toEqual({
        kind: 'fetch',
        ordinal: 0,
        at: expect.any(String) as unknown,
        url: DECLARED_URL,
        ok: true,
        final_url: `${DECLARED_URL}/`,
        http_status: 200,
        content_sha256: sha256(PAGE),
        result_sha256: sha256(webFetchResultText({ ...(res.ok ? res.result : ({} as never)) })),
        response_bytes: PAGE.length,
      });
      expect(brokerRecordSchema.safeParse(handle.records[0]).success).toBe(true);
    });

    it('a compromised child that hands its model invented page text fails the audit; an honest one passes', async () => {
      const fetchArgs = JSON.stringify({ url: DECLARED_URL });
      const scripted: ModelProvider = {
        id: 'fake:scripted',
        engine: 'fake',
        complete: (req: ModelRequest) =>
          Promise.resolve(req.messages.some((m) => m.role === 'tool')
            ? { content: 'done', toolCalls: [], stopReason: 'stop', usage: { inputTokens: 1, outputTokens: 1 }, model: 'm' }
            : { content: '', toolCalls: [{ id: 'f1', name: RESEARCH_FETCH_TOOL, arguments: fetchArgs }], stopReason: 'tool_calls', usage: { inputTokens: 1, outputTokens: 1 }, model: 'm' }),
      };
      for (const hostile of [true, false]) {
        await broker?.close();
        const handle = await start({ provider: scripted, fetcher: okFetcher });
        const user = { role: 'user' as const, content: 'research' };
        const tools = [{ name: RESEARCH_FETCH_TOOL, description: 'fetch', parameters: { type: 'object', properties: {} } }];
        const first = await client.modelTurn({ messages: [user], tools });
        const res = await client.fetch({ url: DECLARED_URL });
        if (!res.ok) throw new Error('the fetch failed');
        // The compromised child keeps every provenance field the broker gave it, but swaps the page text.
        const shown = webFetchResultText(hostile ? { ...res.result, content: 'Invented page: the answer is 42.' } : res.result);
        await client.modelTurn({ messages: [user, first.message, { role: 'tool', content: shown, tool_call_id: 'f1' }], tools });
        const log = [{
          schema_version: SCHEMA.toolCall, ordinal: 0, tool_name: RESEARCH_FETCH_TOOL, arguments_sha256: sha256(fetchArgs), arguments_bytes: fetchArgs.length,
          result_bytes: Buffer.byteLength(shown), result_sha256: sha256(shown), status: 'ok', duration_ms: 1,
          url: DECLARED_URL, final_url: res.result.final_url, http_status: res.result.status, response_bytes: res.result.response_bytes, content_sha256: res.result.content_sha256,
        }] as ToolCallLogRecord[];
        // The log and the conversation agree with each other either way: the lie is consistent.
        expect(() => crossCheckConversation(log, handle.records)).not.toThrow();
        if (hostile) {
          expect(() => crossCheckBrokerRecord(log, handle.records)).toThrow(/fetch 0 .*the tool result differs from the extraction the broker returned/);
        } else {
          expect(crossCheckBrokerRecord(log, handle.records)).toMatchObject({ logFetches: 1, brokerFetches: 1 });
        }
      }
    });

    it('refuses an undeclared url without calling the fetcher and records only its hash', async () => {
      let calls = 0;
      const handle = await start({
        fetcher: (req, signal) => {
          calls += 1;
          return okFetcher(req, signal);
        },
      });
      const undeclared = 'https://example.com/undeclared?token=x';
      const res = await client.fetch({ url: undeclared });
      expect(res).toEqual({ ok: false, error: { code: 'url_not_declared', message: BROKER_MESSAGES.notDeclared } });
      expect(calls).toBe(0);
      const record = handle.records[0];
      expect(record).toMatchObject({ kind: 'fetch', ok: false, error_code: 'url_not_declared', rejected_url_sha256: sha256(undeclared) });
      expect(JSON.stringify(handle.records)).not.toContain('undeclared');
      expect(brokerRecordSchema.safeParse(record).success).toBe(true);
    });

    it('passes egress failures through with their code and status', async () => {
      const handle = await start({
        fetcher: () => Promise.reject(new FusionError('http_error', 'origin answered 404', { details: { status: 404 } })),
      });
      const res = await client.fetch({ url: DECLARED_URL });
      expect(res).toEqual({ ok: false, error: { code: 'http_error', message: 'origin answered 404', http_status: 404 } });
      expect(handle.records[0]).toMatchObject({ kind: 'fetch', url: DECLARED_URL, ok: false, error_code: 'http_error', http_status: 404 });
      expect(brokerRecordSchema.safeParse(handle.records[0]).success).toBe(true);
    });

    it('shares one ordinal sequence between model and fetch records', async () => {
      const handle = await start({ fetcher: okFetcher });
      await client.modelTurn(TURN);
      await client.fetch({ url: DECLARED_URL });
      await client.modelTurn(TURN);
      expect(handle.records.map((r) => [r.kind, r.ordinal])).toEqual([
        ['model', 0],
        ['fetch', 1],
        ['model', 2],
      ]);
    });
  });
});
