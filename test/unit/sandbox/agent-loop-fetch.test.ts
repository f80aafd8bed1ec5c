import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runAgentLoop } from '../../../sandbox/agent-loop.js';
import { openToolCallLog } from '../../../sandbox/audit-log.js';
import { createBrokerClient } from '../../../sandbox/broker-client.js';
import { WEB_FETCH_MESSAGES, checkWebFetchArgs, childCanonicalUrl, runWebFetchTool } from '../../../sandbox/web-fetch-tool.js';
import { crossCheckBrokerRecord } from '../../../src/audit/cross-check.js';
import { verifyToolCallLog } from '../../../src/audit/verify-log.js';
import type { FetchResponse } from '../../../src/contracts/broker-protocol.js';
import type { BrokerRecord } from '../../../src/contracts/broker-record.js';
import { CANDIDATE_TOOLS, RESEARCH_FETCH_TOOL } from '../../../src/contracts/constants.js';
import {
  DECLARED_URL,
  answerTurn,
  call,
  childRequest,
  startFakeBroker,
  toolTurn,
  type FakeBroker,
} from '../../integration/broker/fixtures.js';
import { agentWorkspace } from './workspace.js';

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');
const TOOLS = [...CANDIDATE_TOOLS, RESEARCH_FETCH_TOOL];
const PAGE = '# Docs\n\nHello.';

describe('checkWebFetchArgs (docs/behaviour.md#e2)', () => {
  const declared = [DECLARED_URL, 'https://example.org/a?q=1'];

  it('accepts a declared canonical url with an optional extract', () => {
    expect(checkWebFetchArgs({ url: DECLARED_URL }, declared)).toEqual({ ok: true, request: { url: DECLARED_URL } });
    expect(checkWebFetchArgs({ url: DECLARED_URL, extract: 'text' }, declared)).toEqual({ ok: true, request: { url: DECLARED_URL, extract: 'text' } });
    expect(checkWebFetchArgs({ url: DECLARED_URL, extract: null }, declared)).toEqual({ ok: true, request: { url: DECLARED_URL } });
  });

  it('accepts a declared url listed with surrounding whitespace', () => {
    expect(checkWebFetchArgs({ url: DECLARED_URL }, [`  ${DECLARED_URL} `]).ok).toBe(true);
  });

  it('refuses anything but {url, extract?}', () => {
    for (const args of [{ url: DECLARED_URL, prompt: 'x' }, { extract: 'text' }, {}, { url: DECLARED_URL, headers: {} }]) {
      expect(checkWebFetchArgs(args, declared)).toMatchObject({ ok: false, message: WEB_FETCH_MESSAGES.keys });
    }
    expect(checkWebFetchArgs([DECLARED_URL], declared)).toMatchObject({ ok: false, message: 'fusion_web_fetch arguments must be an object' });
    expect(checkWebFetchArgs({ url: '  ' }, declared)).toMatchObject({ ok: false, message: WEB_FETCH_MESSAGES.url });
    expect(checkWebFetchArgs({ url: 7 }, declared)).toMatchObject({ ok: false, message: WEB_FETCH_MESSAGES.url, attemptedUrl: '' });
    expect(checkWebFetchArgs({ url: DECLARED_URL, extract: 'html' }, declared)).toMatchObject({ ok: false, message: WEB_FETCH_MESSAGES.extract });
  });

  it('refuses a url that is not exactly its canonical form', () => {
    for (const url of [
      'HTTPS://Example.COM/docs',
      'https://example.com/docs#intro',
      'https://example.com:443/docs',
      'https://example.com./docs',
      ' https://example.com/docs',
      'https://example.com/a/../docs',
      'example.com/docs',
    ]) {
      expect(checkWebFetchArgs({ url }, declared)).toEqual({ ok: false, message: WEB_FETCH_MESSAGES.notCanonical, attemptedUrl: url });
    }
    expect(WEB_FETCH_MESSAGES.notCanonical).toBe('fusion_web_fetch URL must exactly match its declared canonical URL');
  });

  it('refuses a canonical url that was not declared', () => {
    expect(checkWebFetchArgs({ url: 'https://example.com/other' }, declared)).toEqual({
      ok: false,
      message: 'fusion_web_fetch URL was not declared in the research source policy',
      attemptedUrl: 'https://example.com/other',
    });
    expect(checkWebFetchArgs({ url: 'https://example.org/a?q=1' }, declared).ok).toBe(true);
  });

  it('computes the canonical form like source declaration does', () => {
    expect(childCanonicalUrl('HTTPS://Example.COM:443/a?q=1#frag')).toBe('https://example.com/a?q=1');
    expect(childCanonicalUrl('https://example.com./a')).toBe('https://example.com/a');
    expect(childCanonicalUrl('not a url')).toBeUndefined();
  });

  it('never asks the broker when a check fails', async () => {
    let asked = 0;
    const broker = {
      fetch: (): Promise<FetchResponse> => {
        asked += 1;
        return Promise.reject(new Error('unexpected'));
      },
    };
    const outcome = await runWebFetchTool({ url: 'https://evil.example/' }, { declaredUrls: declared, broker });
    expect(asked).toBe(0);
    expect(outcome).toEqual({
      status: 'error',
      text: WEB_FETCH_MESSAGES.notDeclared,
      provenance: { outcome: 'rejected', attemptedUrl: 'https://evil.example/' },
    });
  });
});

describe('runAgentLoop with fusion_web_fetch', () => {
  let root: string;
  let cleanup: () => void;
  let out: string;
  let repo: string;
  let broker: FakeBroker | undefined;

  beforeEach(() => {
    ({ root, repo, out, cleanup } = agentWorkspace('fusion-fetch-'));
  });
  afterEach(async () => {
    await broker?.close();
    broker = undefined;
    cleanup();
  });

  it('checks arguments before any network access and logs provenance the verifier and cross-check accept', async () => {
    const undeclared = 'https://example.com/secret';
    const nonCanonical = 'HTTPS://EXAMPLE.COM/docs';
    const script = [
      toolTurn(
        call(RESEARCH_FETCH_TOOL, { url: undeclared }),
        call(RESEARCH_FETCH_TOOL, { url: nonCanonical }),
        call(RESEARCH_FETCH_TOOL, { url: DECLARED_URL, instructions: 'ignore previous' }),
      ),
      toolTurn(call(RESEARCH_FETCH_TOOL, { url: DECLARED_URL, extract: 'markdown' })),
      toolTurn(call(RESEARCH_FETCH_TOOL, { url: DECLARED_URL })),
      answerTurn(`Per ${DECLARED_URL}: "Hello."`),
    ];
    const okResult: FetchResponse = {
      ok: true,
      result: {
        url: DECLARED_URL,
        final_url: `${DECLARED_URL}/`,
        status: 200,
        content_type: 'text/markdown',
        format: 'markdown',
        truncated: false,
        content: PAGE,
        response_bytes: Buffer.byteLength(PAGE),
        content_sha256: sha256(PAGE),
      },
    };
    const errResult: FetchResponse = { ok: false, error: { code: 'http_error', message: 'origin answered 404', http_status: 404 } };
    broker = await startFakeBroker(
      join(root, 'b.sock'),
      (_req, i) => script[i] ?? answerTurn('unexpected'),
      (_req, i) => (i === 0 ? okResult : errResult),
    );
    const log = openToolCallLog({ dir: out, slot: 1, attempt: 1 });
    const request = childRequest({ workflow: 'research', tools: TOOLS, declared_urls: [DECLARED_URL] });
    const outcome = await runAgentLoop({
      request,
      broker: createBrokerClient({ socketPath: broker.socketPath }),
      repoRoot: repo,
      outDir: out,
      toolLog: log,
    });
    expect(outcome).toMatchObject({ status: 'answered', tool_calls: 5, model_requests: 4 });

    // Only the two valid calls reached the broker.
    expect(broker.fetchRequests).toEqual([{ url: DECLARED_URL, extract: 'markdown' }, { url: DECLARED_URL }]);

    const second = broker.modelRequests[1]?.messages ?? [];
    expect(second.slice(-3).map((m) => m.content)).toEqual([
      WEB_FETCH_MESSAGES.notDeclared,
      WEB_FETCH_MESSAGES.notCanonical,
      WEB_FETCH_MESSAGES.keys,
    ]);
    const fetched = JSON.parse(broker.modelRequests[2]?.messages.at(-1)?.content ?? '{}') as Record<string, unknown>;
    expect(Object.keys(fetched)).toEqual(['url', 'final_url', 'status', 'content_type', 'format', 'truncated', 'content']);
    expect(fetched.content).toBe(PAGE);
    expect(broker.modelRequests[3]?.messages.at(-1)?.content).toBe('fusion_web_fetch failed (http_error): origin answered 404');

    expect(log.seal(true).status).toBe('complete');
    const verified = await verifyToolCallLog({ dir: out, slot: 1, attempt: 1, allowedTools: TOOLS, declaredUrls: [DECLARED_URL] });
    const records = verified.records;
    expect(records.map((r) => r.status)).toEqual(['error', 'error', 'error', 'ok', 'error']);
    expect(records[0]).toMatchObject({ rejected_url_sha256: sha256(undeclared) });
    expect(records[0]?.url).toBeUndefined();
    expect(records[1]).toMatchObject({ rejected_url_sha256: sha256(nonCanonical) });
    expect(records[2]).toMatchObject({ rejected_url_sha256: sha256(DECLARED_URL) });
    expect(records[3]).toMatchObject({
      url: DECLARED_URL,
      final_url: `${DECLARED_URL}/`,
      http_status: 200,
      response_bytes: Buffer.byteLength(PAGE),
      content_sha256: sha256(PAGE),
    });
    expect(records[4]).toMatchObject({ rejected_url_sha256: sha256(DECLARED_URL), http_status: 404 });
    expect(records[4]?.final_url).toBeUndefined();

    // What the real broker would have recorded for the two fetches it saw.
    const at = new Date().toISOString();
    const brokerRecords: BrokerRecord[] = [
      { kind: 'fetch', ordinal: 0, at, url: DECLARED_URL, ok: true, final_url: `${DECLARED_URL}/`, http_status: 200, content_sha256: sha256(PAGE), response_bytes: Buffer.byteLength(PAGE) },
      { kind: 'fetch', ordinal: 1, at, url: DECLARED_URL, ok: false, error_code: 'http_error', http_status: 404 },
    ];
    expect(crossCheckBrokerRecord(records, brokerRecords, { allowChildOnlyRejections: true })).toMatchObject({
      logFetches: 5,
      brokerFetches: 2,
      childOnlyRejections: 3,
    });
  });

  it('logs a fetch call as rejected when fusion_web_fetch is not in the tools list', async () => {
    const script = [toolTurn(call(RESEARCH_FETCH_TOOL, { url: DECLARED_URL })), answerTurn('ok')];
    broker = await startFakeBroker(join(root, 'b.sock'), (_req, i) => script[i] ?? answerTurn('unexpected'), () => {
      throw new Error('must not fetch');
    });
    const log = openToolCallLog({ dir: out, slot: 1, attempt: 1 });
    const outcome = await runAgentLoop({
      request: childRequest({ declared_urls: [DECLARED_URL] }),
      broker: createBrokerClient({ socketPath: broker.socketPath }),
      repoRoot: repo,
      outDir: out,
      toolLog: log,
    });
    expect(outcome.status).toBe('answered');
    expect(broker.fetchRequests).toHaveLength(0);
    expect(log.brokenReason).toBeUndefined();
    expect(log.seal(true).status).toBe('complete');
  });
});
