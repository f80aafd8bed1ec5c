/**
 * Pages rendered with hostile task and page text hold no live markup of it: parsed as a browser
 * would, the only script is the static one, no element carries an event handler or a javascript:
 * URL, and each hostile string comes back as text, byte for byte.
 */
import { Parser } from 'htmlparser2';
import { describe, expect, it } from 'vitest';
import { overviewPage, researchPage, summaryText, taskPage, tasksPage, type PageContext } from '../../../src/dashboard/pages.js';
import type { TaskDetail, TaskRow, ResearchRow } from '../../../src/dashboard/data.js';

const PAYLOADS = [
  `<script>window.__pwned=1</script>`,
  `<img src=x onerror="window.__pwned=2">`,
  `</pre><script>window.__pwned=3</script><pre>`,
  `"><svg onload="window.__pwned=4">`,
  `' onmouseover='window.__pwned=5`,
  `<a href="javascript:window.__pwned=6">click</a>`,
  `<!--`, `]]>`, `<style>body{display:none}</style>`, `<meta http-equiv="refresh" content="0;url=http://evil.example">`,
];
const HOSTILE = PAYLOADS.join('\n');

interface Parsed { tags: Array<{ name: string; attrs: Record<string, string> }>; text: string }

function parse(page: string): Parsed {
  const tags: Parsed['tags'] = [];
  let text = '';
  const parser = new Parser({
    onopentag: (name, attrs) => tags.push({ name, attrs }),
    ontext: (t) => (text += t),
  }, { decodeEntities: true });
  parser.write(page);
  parser.end();
  return { tags, text };
}

function expectInert(page: string): Parsed {
  const p = parse(page);
  const scripts = p.tags.filter((t) => t.name === 'script');
  expect(scripts).toEqual([{ name: 'script', attrs: { src: '/static/dashboard.js', defer: '' } }]);
  for (const t of p.tags) {
    expect(['svg', 'img', 'style', 'iframe', 'object', 'embed', 'form'], `a <${t.name}> element`).not.toContain(t.name);
    if (t.name === 'meta') expect(t.attrs['http-equiv']).toBeUndefined();
    for (const [k, v] of Object.entries(t.attrs)) {
      expect(k.startsWith('on'), `attribute ${k} on <${t.name}>`).toBe(false);
      expect(v.toLowerCase()).not.toContain('javascript:');
    }
  }
  return p;
}

const ctx: PageContext = { now: Date.parse('2026-01-01T00:10:00Z'), viewer: `alice ${HOSTILE}`, userName: (uid) => (uid === 1001 ? `al<i>ce` : undefined) };
const row: TaskRow = {
  id: 'investigate-0123456789abcdef0123456789abcdef', workflow: 'investigate', state: 'candidates_running', createdAt: '2026-01-01T00:00:00Z', updatedAt: '2026-01-01T00:01:00Z',
  callerUid: 1001, objective: HOSTILE, error: { code: 'child_failed', message: HOSTILE },
};
const detail: TaskDetail = {
  task: { ...row, repoDir: `/srv/${HOSTILE}`, resumeCount: 0 },
  attempts: [{ stage: 'candidate-1', attempt: 1, status: 'failed', startedAt: '2026-01-01T00:00:01Z', endedAt: null, toolCalls: 3, exit: HOSTILE, error: { code: 'x', message: HOSTILE }, tarballSha256: null }],
  answer: HOSTILE,
  citations: { checked: 2, confirmed: 1, unconfirmed: [{ kind: 'web', citation: HOSTILE, status: 'quote_not_found', quoted: HOSTILE }] },
  audit: { tarball: { sha256: 'a'.repeat(64), bytes: 10, manifestSha256: 'b'.repeat(64), signed: true, publicKeySha256: 'c'.repeat(64), createdAt: '2026-01-01T00:02:00Z' }, verification: { ok: false, code: 'artifact_error', message: HOSTILE }, answerSha256: null, metadataSha256: null, engine: HOSTILE, replayedCalls: 3 },
};
const run: ResearchRow = {
  id: 'run_1', workspaceId: 'ws', status: 'succeeded', query: HOSTILE, sourceUrls: [`https://example.test/${HOSTILE}`], limits: { maxPages: 3 } as ResearchRow['limits'],
  error: HOSTILE, crawl: { robots: [{ host: HOSTILE, status: 'failed', detail: HOSTILE }], skipped: [{ url: HOSTILE, reason: HOSTILE }], stoppedBy: HOSTILE }, createdAt: '2026-01-01T00:00:00Z', startedAt: '2026-01-01T00:00:00Z', finishedAt: null,
};

describe('pages with hostile text', () => {
  it('the task list and overview show objectives and errors as text', () => {
    const list = expectInert(tasksPage(ctx, [row], undefined));
    expect(list.text).toContain(HOSTILE);
    const overview = expectInert(overviewPage(ctx, {
      queued: 1, running: 1, sandboxBackend: HOSTILE, tasksByState: { [HOSTILE]: 1 }, failuresByCode: [{ code: HOSTILE, count: 1, lastAt: '2026-01-01T00:00:00Z' }],
      maintenance: [{ job: 'backup', startedAt: '2026-01-01T00:00:00Z', durationMs: 5, outcome: 'failed', summary: { message: HOSTILE } }],
    }, [row]));
    expect(overview.text).toContain(HOSTILE);
  });
  it('a task page keeps the answer inside one <pre> as text, behind the caution', () => {
    const page = taskPage(ctx, detail);
    const p = expectInert(page);
    expect(p.text).toContain(HOSTILE);
    expect(p.text).toContain('Untrusted content: the merged answer');
    // Exactly the one <pre> the page opened: the payload's `</pre><pre>` did not add one.
    expect(p.tags.filter((t) => t.name === 'pre')).toHaveLength(1);
    expect(page).toContain('data-live="5000"');
  });
  it('a research page shows snapshots and the document as text', () => {
    const snapshot = { url: HOSTILE, canonicalUrl: HOSTILE, finalUrl: HOSTILE, httpStatus: 200, contentType: HOSTILE, bytes: 1, sha256: null, fetchedAt: '2026-01-01T00:00:00Z', content: HOSTILE };
    const doc = { id: 'd', runId: 'run_1', workspaceId: 'ws', name: HOSTILE, mimeType: 'text/markdown', tags: [], sourceUri: '', indexingStatus: '', status: '', enabled: true, content: `# Title\n${HOSTILE}`, createdAt: '2026-01-01T00:00:00Z' };
    const p = expectInert(researchPage(ctx, run, [snapshot], doc));
    expect(p.tags.filter((t) => t.name === 'pre')).toHaveLength(2);
    expect(p.text).toContain(`# Title\n${HOSTILE}`);
  });
  it('a terminal task is not live (its page stops refreshing)', () => {
    expect(taskPage(ctx, { ...detail, task: { ...detail.task, state: 'completed' } })).not.toContain('data-live');
  });
});

describe('maintenance summaries', () => {
  it('read as key: value pairs, lists by their length, never as raw JSON', () => {
    expect(summaryText({ killed: [101, 102], cgroups: ['/sys/fs/cgroup/a'], removed: 3, docker: { containers: [] } })).toBe('killed: 2, cgroups: 1, removed: 3, docker: {containers: 0}');
    expect(summaryText(null)).toBe('—');
    expect(summaryText({})).toBe('—');
  });
});
