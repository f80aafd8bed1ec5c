/**
 * The Markdown document of a research run, built only from the run and its crawl outcome (no
 * clock, no I/O), so the same outcome always gives the same bytes.
 *
 * Layout: the untrusted-content caution; a title; the query; one section per snapshot, headed
 * by a Markdown link to its canonical URL, with its provenance and its text; the skipped URLs
 * with their reasons; the robots.txt outcome of every host; why the crawl stopped, if a limit
 * stopped it.
 *
 * Page text (and anything else that came from the web: skipped URLs, reasons quoting an origin's
 * headers) is fenced or put in code spans with a fence longer than any backtick run inside, so
 * a page cannot forge a heading or a section of this document. Each snapshot's text is cut at
 * DOCUMENT_SNAPSHOT_MAX_BYTES on a code point, and the cut is stated; the full text stays in
 * the run's snapshots.
 */
import { UNTRUSTED_CAUTION } from '../../contracts/research-limits.js';
import { truncateUtf8 } from '../../egress/utf8-truncate.js';
import type { CrawlOutcome, CrawlSnapshot, ResearchDocumentText } from './port.js';

/** Text of one snapshot kept in the document (UTF-8 bytes). */
export const DOCUMENT_SNAPSHOT_MAX_BYTES = 32 * 1024;
/** Characters of the query kept in the document name. */
export const DOCUMENT_NAME_QUERY_CHARS = 120;

const CONTROL = /[\p{Cc}\p{Cf}\u2028\u2029]/gu;

/** `Research - {query cut to 120 characters}.md`; control characters become spaces (a name is one line). */
export function researchDocumentName(query: string): string {
  const cut = Array.from(query).slice(0, DOCUMENT_NAME_QUERY_CHARS).join('');
  return `Research - ${cut.replace(CONTROL, ' ')}.md`;
}

function longestRun(text: string, char: string): number {
  let longest = 0;
  let current = 0;
  for (const c of text) {
    current = c === char ? current + 1 : 0;
    if (current > longest) longest = current;
  }
  return longest;
}

/** A fenced block that no backtick run in `text` can close. */
export function fenced(text: string, info = 'text'): string {
  const fence = '`'.repeat(Math.max(3, longestRun(text, '`') + 1));
  return `${fence}${info}\n${text}\n${fence}`;
}

/** A one-line code span that no backtick run in `text` can close. */
export function codeSpan(text: string): string {
  const flat = text.replace(/[\r\n]+/gu, ' ').replace(CONTROL, ' ');
  const ticks = '`'.repeat(longestRun(flat, '`') + 1);
  const pad = flat.startsWith('`') || flat.endsWith('`') ? ' ' : '';
  return `${ticks}${pad}${flat}${pad}${ticks}`;
}

/** `[url](<url>)`: WHATWG-serialised URLs never contain `<`, `>` or spaces, so the pointy form is safe. */
export function urlLink(url: string): string {
  const label = url.replace(/[\\[\]]/gu, (c) => `\\${c}`);
  return `[${label}](<${url}>)`;
}

function snapshotText(snapshot: CrawlSnapshot): string {
  const content = snapshot.content;
  if (content === null) return '_No text was kept for this page._';
  const prefix = `${UNTRUSTED_CAUTION}\n\n`;
  const text = content.startsWith(prefix) ? content.slice(prefix.length) : content;
  const cut = truncateUtf8(text, DOCUMENT_SNAPSHOT_MAX_BYTES);
  const notes: string[] = [];
  if (cut.truncated) {
    notes.push(
      `_Text cut here: the first ${String(Buffer.byteLength(cut.text, 'utf8'))} of ${String(Buffer.byteLength(text, 'utf8'))} bytes are shown; the run's snapshots hold the rest._`,
    );
  }
  if (snapshot.truncated === true) notes.push('_The snapshot itself was cut at the snapshot text limit._');
  return [fenced(cut.text), ...notes].join('\n\n');
}

function provenance(snapshot: CrawlSnapshot): string {
  const lines = [
    `- Fetched: ${snapshot.fetchedAt}`,
    `- HTTP status: ${snapshot.httpStatus === null ? 'none' : String(snapshot.httpStatus)}; type: ${snapshot.contentType === null ? 'unknown' : codeSpan(snapshot.contentType)}; bytes: ${snapshot.bytes === null ? 'unknown' : String(snapshot.bytes)}`,
  ];
  if (snapshot.sha256 !== null) lines.push(`- SHA-256 of the raw body: ${snapshot.sha256}`);
  if (snapshot.finalUrl !== null && snapshot.finalUrl !== snapshot.canonicalUrl) lines.push(`- Final URL after redirects: ${urlLink(snapshot.finalUrl)}`);
  if (snapshot.url !== snapshot.canonicalUrl) lines.push(`- Requested as: ${codeSpan(snapshot.url)}`);
  if (snapshot.depth !== undefined) lines.push(`- Link depth from a source URL: ${String(snapshot.depth)}`);
  return lines.join('\n');
}

export function buildResearchDocument(run: { id: string; query: string }, outcome: CrawlOutcome): ResearchDocumentText {
  const parts: string[] = [UNTRUSTED_CAUTION, `# ${researchDocumentName(run.query).replace(/\.md$/u, '')}`];
  parts.push(`Research run ${codeSpan(run.id)}, fetched as ${codeSpan(outcome.userAgent)}.`);
  parts.push('## Query', fenced(run.query));

  parts.push(`## Sources (${String(outcome.snapshots.length)} collected)`);
  if (outcome.snapshots.length === 0) parts.push('_No page was collected._');
  outcome.snapshots.forEach((snapshot, index) => {
    parts.push(`### ${String(index + 1)}. ${urlLink(snapshot.canonicalUrl)}`, provenance(snapshot), snapshotText(snapshot));
  });

  const omitted = outcome.skippedOmitted ?? 0;
  parts.push(`## Skipped (${String(outcome.skipped.length + omitted)})`);
  if (outcome.skipped.length === 0) parts.push('_Nothing was skipped._');
  else parts.push(outcome.skipped.map((skip) => `- ${codeSpan(skip.url)}: ${codeSpan(skip.reason)}`).join('\n'));
  if (omitted > 0) parts.push(`_${String(omitted)} more skipped URLs are not listed._`);

  parts.push('## robots.txt');
  if (outcome.robots.length === 0) parts.push('_No host was asked for its robots.txt._');
  else parts.push(outcome.robots.map((note) => `- ${codeSpan(note.host)}: ${note.status}${note.detail === undefined ? '' : ` (${codeSpan(note.detail)})`}`).join('\n'));

  if (outcome.stoppedBy !== undefined) parts.push(`The crawl stopped before its queue was empty: ${outcome.stoppedBy}.`);
  return { name: researchDocumentName(run.query), content: `${parts.join('\n\n')}\n` };
}
