/**
 * A research answer names the declared sources it could not read and why: the fetcher wrapper
 * keeps each failed fetch of a declared URL (never an undeclared one), and the notice lists every
 * declared source no fetch succeeded for, with its last failure or "no candidate fetched it".
 */
import { describe, expect, it } from 'vitest';
import { recordingFetcher } from '../../../src/workflow/candidate-stage.js';
import { sourcesNotice, sourcesNotRead } from '../../../src/workflow/sources-notice.js';
import type { RunState } from '../../../src/workflow/stage-context.js';
import type { FetchResponse } from '../../../src/contracts/broker-protocol.js';

const A = 'https://docs.example.com/a';
const B = 'https://docs.example.com/b';
const C = 'https://docs.example.com/c';

describe('sources not read', () => {
  it('records failed fetches of declared URLs only, and pages that were read', async () => {
    const run = { canonicalInput: { workflow: 'research', context: { declared_sources: [{ canonical_url: A }, { canonical_url: B }] } }, fetched: [] } as unknown as RunState;
    const replies: Record<string, FetchResponse> = {
      [A]: { ok: false, error: { code: 'dns_error', message: 'docs.example.com did not resolve (ENOTFOUND)' } },
      [B]: { ok: true, result: { url: B, final_url: B, status: 200, content_type: 'text/html', format: 'text', truncated: false, content: 'page b', response_bytes: 6, content_sha256: 'x' } },
      [C]: { ok: false, error: { code: 'url_not_declared', message: 'refused' } },
    };
    const pages: RunState['fetched'] = [];
    const fetch = recordingFetcher(async (req) => replies[req.url]!, run, pages);
    const signal = new AbortController().signal;
    for (const url of [A, B, C]) await fetch({ url }, signal);
    expect(run.unread).toEqual([{ url: A, reason: 'dns_error: docs.example.com did not resolve (ENOTFOUND)' }]);
    expect(run.fetched.map((p) => p.url)).toEqual([B]);
  });

  it('names each unread declared source with its last failure, or says no candidate fetched it', () => {
    const notRead = sourcesNotRead([A, B, C], [{ url: B }], [
      { url: A, reason: 'http_error: HTTP 503' },
      { url: A, reason: 'dns_error: docs.example.com did not resolve' },
    ]);
    expect(notRead).toEqual([
      { url: A, reason: 'dns_error: docs.example.com did not resolve' },
      { url: C, reason: 'no candidate fetched it' },
    ]);
    const text = sourcesNotice(notRead);
    expect(text).toContain('## Sources not read');
    expect(text).toContain('these 2 declared sources');
    expect(text).toContain(`- \`${A}\`: \`dns_error: docs.example.com did not resolve\``);
    expect(text).toContain(`- \`${C}\`: \`no candidate fetched it\``);
  });

  it('says nothing when every source was read', () => {
    expect(sourcesNotice(sourcesNotRead([A], [{ url: A }], []))).toBe('');
  });
});
