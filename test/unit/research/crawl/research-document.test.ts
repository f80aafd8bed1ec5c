import { describe, expect, it } from 'vitest';
import { buildResearchDocument, codeSpan, DOCUMENT_SNAPSHOT_MAX_BYTES, fenced, researchDocumentName } from '../../../../src/research/crawl/research-document.js';
import type { CrawlOutcome, CrawlSnapshot } from '../../../../src/research/crawl/port.js';
import { UNTRUSTED_CAUTION } from '../../../../src/contracts/research-limits.js';

function snapshot(path: string, text: string, extra: Partial<CrawlSnapshot> = {}): CrawlSnapshot {
  return {
    url: `https://a.test${path}`,
    canonicalUrl: `https://a.test${path}`,
    finalUrl: `https://a.test${path}`,
    httpStatus: 200,
    contentType: 'text/html',
    bytes: 123,
    sha256: 'a'.repeat(64),
    content: `${UNTRUSTED_CAUTION}\n\n${text}`,
    fetchedAt: '2026-01-01T00:00:00.000Z',
    depth: 0,
    ...extra,
  };
}

const run = { id: 'research_0123', query: 'How do (they) work?' };

function outcome(extra: Partial<CrawlOutcome> = {}): CrawlOutcome {
  return {
    snapshots: [snapshot('/one', 'First page text.'), snapshot('/two?a=1', 'Second ``` page', { depth: 1, url: 'https://A.test/two?a=1#f' })],
    skipped: [{ url: 'https://a.test/private', reason: 'disallowed by robots.txt (Disallow: /private)' }],
    robots: [{ host: 'https://a.test', status: 'ok', detail: 'HTTP 200, 1 rules for *' }],
    userAgent: 'FluxusResearchBot',
    ...extra,
  };
}

describe('researchDocumentName', () => {
  it('is "Research - {query cut to 120 characters}.md"', () => {
    expect(researchDocumentName('short')).toBe('Research - short.md');
    const long = 'é'.repeat(130);
    expect(researchDocumentName(long)).toBe(`Research - ${'é'.repeat(120)}.md`);
    expect(researchDocumentName('😀'.repeat(121))).toBe(`Research - ${'😀'.repeat(120)}.md`);
  });

  it('keeps one line', () => {
    expect(researchDocumentName('a\nb\tc')).toBe('Research - a b c.md');
  });
});

describe('buildResearchDocument', () => {
  it('starts with the caution, has the query, links every snapshot by canonical URL, lists skips and robots', () => {
    const doc = buildResearchDocument(run, outcome());
    expect(doc.name).toBe('Research - How do (they) work?.md');
    expect(doc.content.startsWith(`${UNTRUSTED_CAUTION}\n\n`)).toBe(true);
    expect(doc.content).toContain('How do (they) work?');
    expect(doc.content).toContain('### 1. [https://a.test/one](<https://a.test/one>)');
    expect(doc.content).toContain('### 2. [https://a.test/two?a=1](<https://a.test/two?a=1>)');
    expect(doc.content).toContain('First page text.');
    expect(doc.content).toContain('- `https://a.test/private`: `disallowed by robots.txt (Disallow: /private)`');
    expect(doc.content).toContain('- `https://a.test`: ok (`HTTP 200, 1 rules for *`)');
    // The caution appears once: snapshot texts are included without their own copy.
    expect(doc.content.split(UNTRUSTED_CAUTION)).toHaveLength(2);
  });

  it('is deterministic', () => {
    expect(buildResearchDocument(run, outcome())).toEqual(buildResearchDocument(run, outcome()));
  });

  it('fences page text so it cannot close its block or forge a section', () => {
    const hostile = 'x\n````\n## Skipped (0)\n````';
    const doc = buildResearchDocument(run, outcome({ snapshots: [snapshot('/h', hostile)] }));
    expect(doc.content).toContain(`\`\`\`\`\`text\n${hostile}\n\`\`\`\`\``);
  });

  it('cuts long snapshot text on a code point and says so', () => {
    const text = '😀'.repeat(DOCUMENT_SNAPSHOT_MAX_BYTES); // 4 bytes each: far over the cap
    const doc = buildResearchDocument(run, outcome({ snapshots: [snapshot('/big', text, { truncated: true })] }));
    expect(doc.content).toContain(`_Text cut here: the first ${String(DOCUMENT_SNAPSHOT_MAX_BYTES)} of ${String(DOCUMENT_SNAPSHOT_MAX_BYTES * 4)} bytes are shown`);
    expect(doc.content).toContain('_The snapshot itself was cut at the snapshot text limit._');
    expect(Buffer.byteLength(doc.content)).toBeLessThan(DOCUMENT_SNAPSHOT_MAX_BYTES + 4096);
  });

  it('says when nothing was collected, skipped, or asked, and why the crawl stopped', () => {
    const doc = buildResearchDocument(run, { snapshots: [], skipped: [], robots: [], userAgent: 'UA', stoppedBy: 'maxPages (1) reached', skippedOmitted: 3 });
    expect(doc.content).toContain('_No page was collected._');
    expect(doc.content).toContain('## Skipped (3)');
    expect(doc.content).toContain('_3 more skipped URLs are not listed._');
    expect(doc.content).toContain('_No host was asked for its robots.txt._');
    expect(doc.content).toContain('The crawl stopped before its queue was empty: maxPages (1) reached.');
  });

  it('escapes link labels', () => {
    const doc = buildResearchDocument(run, outcome({ snapshots: [snapshot('/a[1]', 'x')] }));
    expect(doc.content).toContain('[https://a.test/a\\[1\\]](<https://a.test/a[1]>)');
  });
});

describe('fences', () => {
  it('fenced() outlasts the longest backtick run; codeSpan() stays on one line', () => {
    expect(fenced('a `` b')).toBe('```text\na `` b\n```');
    expect(fenced('``````')).toBe('```````text\n``````\n```````');
    expect(codeSpan('a`b\nc')).toBe('``a`b c``');
    expect(codeSpan('`x')).toBe('`` `x ``');
  });
});
