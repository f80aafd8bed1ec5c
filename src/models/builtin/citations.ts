/**
 * Reading citations back out of an answer (any author's, not only this engine's), and the
 * mechanical citation checks the workflow attaches to the evaluator input.
 *
 *   - `src/app.ts:42` …            a repository citation (code span holding `path:line`)
 *     > `export function start() {`   its quote (code span on the next `>` line)
 *   - https://example.com/page …    a web citation, followed by `>` lines quoting the page
 */
import { describeStatus, extractCitations, extractUrlCitations } from '../../contracts/citations.js';
import { asArray, asRecord, asString } from './transcript.js';

export interface CitedLine {
  citation: string;
  path: string;
  line: number;
  /** The quoted line text (code span content), when the answer quotes it. */
  quote: string | null;
}

export interface CitedUrl {
  url: string;
  /** Quoted lines (`> text`) following the citation. */
  quotes: string[];
}

export interface PathCheck {
  citation: string;
  path: string;
  line: number;
  status: string;
  quoted?: string;
  actual?: string;
}

export interface UrlCheck {
  url: string;
  status: string;
  quoted?: string;
}

const URL = /https?:\/\/[^\s<>`"')\]]+/gu;

/** CommonMark code spans of one line: a run of n backticks closes at the next run of exactly n. */
export function codeSpans(line: string): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < line.length) {
    const open = line.indexOf('`', i);
    if (open < 0) break;
    let n = 0;
    while (line[open + n] === '`') n += 1;
    let search = open + n;
    let close = -1;
    while (search < line.length) {
      const next = line.indexOf('`', search);
      if (next < 0) break;
      let m = 0;
      while (line[next + m] === '`') m += 1;
      if (m === n) {
        close = next;
        break;
      }
      search = next + m;
    }
    if (close < 0) {
      i = open + n;
      continue;
    }
    let content = line.slice(open + n, close);
    if (content.length > 2 && content.startsWith(' ') && content.endsWith(' ') && content.trim() !== '') content = content.slice(1, -1);
    out.push(content);
    i = close + n;
  }
  return out;
}

/**
 * Repository citations of an answer, read with the one citation parser the supervisor's checks
 * use (so what this engine counts as cited is exactly what gets checked). `quote` is the first
 * quoted line.
 */
export function parseCitedLines(text: string): CitedLine[] {
  return extractCitations(text).map((c) => {
    const first = c.quoted?.split('\n')[0]?.trim();
    return { citation: `${c.path}:${c.line}`, path: c.path, line: c.line, quote: first === undefined || first === '' ? null : first };
  });
}

/** Web citations of an answer (the same shared parser), with their quoted lines. */
export function parseCitedUrls(text: string): CitedUrl[] {
  return extractUrlCitations(text).map((c) => ({
    url: c.url,
    quotes: (c.quoted ?? '')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== ''),
  }));
}

/** The file an answer names as most likely: the first path in its Summary section. */
export function summaryClaim(text: string): string | null {
  const m = /^#{1,6}\s*summary\b.*$/imu.exec(text);
  if (!m) return null;
  const rest = text.slice(m.index + m[0].length);
  const end = rest.search(/^#{1,6}\s/mu);
  const section = end >= 0 ? rest.slice(0, end) : rest;
  for (const span of codeSpans(section)) {
    const s = span.trim();
    if (s.includes(' ') || /^https?:/iu.test(s)) continue;
    const path = s.replace(/:\d+(?:-\d+)?$/u, '');
    if (/[/.]/u.test(path) && /[A-Za-z]/u.test(path)) return path;
  }
  const url = URL.exec(section);
  URL.lastIndex = 0;
  return url ? url[0].replace(/[.,;:]+$/u, '') : null;
}

export function parseChecks(value: unknown): { paths: PathCheck[]; urls: UrlCheck[] } {
  const paths: PathCheck[] = [];
  const urls: UrlCheck[] = [];
  for (const item of asArray(value)) {
    const rec = asRecord(item);
    const status = asString(rec['status']);
    if (typeof rec['url'] === 'string' && rec['path'] === undefined) {
      urls.push(typeof rec['quoted'] === 'string' ? { url: rec['url'], status, quoted: rec['quoted'] } : { url: rec['url'], status });
      continue;
    }
    const citation = asString(rec['citation']);
    const path = asString(rec['path']) || citation.replace(/:\d+(?:-\d+)?$/u, '');
    const line = typeof rec['line'] === 'number' ? rec['line'] : Number(/:(\d+)(?:-\d+)?$/u.exec(citation)?.[1] ?? NaN);
    if (path === '' || !Number.isFinite(line)) continue;
    const check: PathCheck = { citation: citation || `${path}:${line}`, path, line, status };
    if (typeof rec['quoted'] === 'string') check.quoted = rec['quoted'];
    if (typeof rec['actual'] === 'string') check.actual = rec['actual'];
    paths.push(check);
  }
  return { paths, urls };
}

export { describeStatus };
