import { describe, expect, it } from 'vitest';
import { normalisePayload, ResearchCreateBodySchema } from '../../../src/contracts/research.js';
import { researchDocumentId, researchRunId } from '../../../src/research/run-id.js';
import { canRunTransition, CANCELABLE, isTerminalRun, RUN_TRANSITIONS } from '../../../src/contracts/research-run-state.js';
import { payloadSha256 } from '../../../src/research/research-service.js';
import { RESEARCH_RUN_STATUSES } from '../../../src/contracts/research.js';

describe('research run ids', () => {
  it('match the test vector of docs/behaviour.md#g3: ws_1 + key-1', () => {
    expect(researchRunId('ws_1', 'key-1')).toBe('research_8b31633930b443608a60da6bb2b8d5c4');
    expect(researchDocumentId('research_8b31633930b443608a60da6bb2b8d5c4')).toBe('research_document_research_8b31633930b443608a60da6bb2b8d5c4');
  });

  it('separate workspace and key with NUL (no concatenation collision)', () => {
    expect(researchRunId('ws_1', 'key-1')).not.toBe(researchRunId('ws_1k', 'ey-1'));
  });
});

describe('create body contract', () => {
  const ok = { query: '  q  ', sourceUrls: ['https://Example.com/a'] };

  it('trims the query and fills omitted limits with the defaults', () => {
    const p = normalisePayload(ResearchCreateBodySchema.parse({ ...ok, limits: { maxPages: 3, maxDepth: 0 } }));
    expect(p).toEqual({
      query: 'q',
      sourceUrls: ['https://example.com/a'],
      limits: { maxDomains: 8, maxPages: 3, maxDepth: 0, maxBytesPerPage: 2 * 1024 * 1024, maxTotalBytes: 20 * 1024 * 1024, maxDurationMs: 30_000 },
    });
  });

  it('payload equality ignores spelling that normalises away, not real differences', () => {
    const h = (b: unknown): string => payloadSha256(normalisePayload(ResearchCreateBodySchema.parse(b)));
    expect(h(ok)).toBe(h({ query: 'q', sourceUrls: ['https://example.com/a'], limits: { maxPages: 20 } }));
    expect(h(ok)).not.toBe(h({ ...ok, limits: { maxPages: 19 } }));
    expect(h(ok)).not.toBe(h({ ...ok, sourceUrls: ['https://example.com/b'] }));
    expect(h(ok)).not.toBe(h({ ...ok, query: 'q2' }));
  });

  it('is closed and reports each limit at its maximum boundary with its path', () => {
    const paths = (b: unknown): string[] => {
      const r = ResearchCreateBodySchema.safeParse(b);
      return r.success ? [] : r.error.issues.map((i) => i.path.join('.'));
    };
    expect(paths({ ...ok, limits: { maxDomains: 8, maxPages: 20, maxDepth: 2, maxBytesPerPage: 2097152, maxTotalBytes: 20971520, maxDurationMs: 30000 } })).toEqual([]);
    expect(paths({ ...ok, limits: { maxDomains: 9 } })).toEqual(['limits.maxDomains']);
    expect(paths({ ...ok, limits: { maxTotalBytes: 20971521 } })).toEqual(['limits.maxTotalBytes']);
    expect(paths({ ...ok, limits: { maxDurationMs: 30001 } })).toEqual(['limits.maxDurationMs']);
    expect(paths({ ...ok, limits: { maxPages: '3' } })).toEqual(['limits.maxPages']);
    expect(paths({ ...ok, extra: true })).toEqual(['']);
    expect(paths({ ...ok, sourceUrls: ['https://a.example/', 'javascript:alert(1)'] })).toEqual(['sourceUrls.1']);
    expect(paths({ ...ok, query: 'x'.repeat(2000) })).toEqual([]);
    expect(paths({ ...ok, sourceUrls: Array(20).fill('http://a.example/') })).toEqual([]);
  });
});

describe('research run state table', () => {
  it('has terminal states without exits, and cancel only from queued/running', () => {
    expect(RESEARCH_RUN_STATUSES.filter(isTerminalRun)).toEqual(['succeeded', 'failed', 'canceled']);
    expect(CANCELABLE).toEqual(['queued', 'running']);
    expect(canRunTransition('queued', 'succeeded')).toBe(false);
    expect(canRunTransition('running', 'queued')).toBe(false);
    expect(canRunTransition('running', 'running')).toBe(true);
    for (const s of ['succeeded', 'failed', 'canceled'] as const) expect(RUN_TRANSITIONS[s]).toEqual([]);
  });
});
