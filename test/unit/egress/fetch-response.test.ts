import { describe, expect, it } from 'vitest';
import { toBrokerFetcher, toFetchResponse, type GuardedFetch } from '../../../src/egress/guarded-fetch.js';
import type { FetchResult } from '../../../src/contracts/broker-protocol.js';
import { FusionError } from '../../../src/errors.js';

const RESULT: FetchResult = {
  url: 'https://example.com/',
  final_url: 'https://example.com/final',
  status: 200,
  content_type: 'text/html',
  format: 'markdown',
  truncated: false,
  content: '# Hi',
  response_bytes: 13,
  content_sha256: 'a'.repeat(64),
};

describe('toFetchResponse', () => {
  it('wraps a result', () => {
    expect(toFetchResponse(RESULT)).toEqual({ ok: true, result: RESULT });
  });

  it('maps a FusionError, carrying http_status when the details have one', () => {
    expect(toFetchResponse(new FusionError('http_error', 'origin answered HTTP 404', { details: { http_status: 404 } }))).toEqual({
      ok: false,
      error: { code: 'http_error', message: 'origin answered HTTP 404', http_status: 404 },
    });
    expect(toFetchResponse(new FusionError('blocked_address', 'no'))).toEqual({ ok: false, error: { code: 'blocked_address', message: 'no' } });
  });

  it('maps anything else to network_error', () => {
    expect(toFetchResponse(new Error('boom'))).toEqual({ ok: false, error: { code: 'network_error', message: 'boom' } });
  });

  it('toBrokerFetcher never throws', async () => {
    const failing = Object.assign(async () => {
      throw new FusionError('dns_failure', 'DNS lookup for x failed');
    }, { close: async () => undefined }) as GuardedFetch;
    const fetcher = toBrokerFetcher(failing);
    await expect(fetcher({ url: 'http://x/' }, new AbortController().signal)).resolves.toEqual({ ok: false, error: { code: 'dns_failure', message: 'DNS lookup for x failed' } });
    const working = Object.assign(async () => RESULT, { close: async () => undefined }) as GuardedFetch;
    await expect(toBrokerFetcher(working)({ url: RESULT.url }, new AbortController().signal)).resolves.toEqual({ ok: true, result: RESULT });
  });
});
