/**
 * Reading citations back out of an answer (any author's, not only this engine's), and the
 * mechanical citation checks the workflow attaches to the evaluator input.
 *
 *   - `src/app.ts:42` …            a repository citation (code span holding `path:line`)
 *     > `export function start() {`   its quote (code span on the next `>` line)
 *   - https://example.com/page …    a web citation, followed by `>` lines quoting the page
 */
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
}

const PATH_LINE = /^([^\s`:][^\s`]*?):(\d+)(?:-\d+)?$/u;
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

function quoteOf(line: string | undefined): string | null {
  if (line === undefined) return null;
  const m = /^\s*>\s?(.*)$/u.exec(line);
  if (!m) return null;
  const spans = codeSpans(m[1] as string);
  return spans.length > 0 ? (spans[0] as string).trim() : (m[1] as string).trim();
}

export function parseCitedLines(text: string): CitedLine[] {
  const lines = text.split('\n');
  const out: CitedLine[] = [];
  lines.forEach((line, i) => {
    if (/^\s*>/u.test(line)) return;
    const found = codeSpans(line)
      .map((s) => PATH_LINE.exec(s.trim()))
      .filter((m): m is RegExpExecArray => m !== null && !/^https?$/iu.test(m[1] as string));
    for (const m of found) {
      const path = m[1] as string;
      const lineNo = Number(m[2]);
      out.push({ citation: `${path}:${lineNo}`, path, line: lineNo, quote: found.length === 1 ? quoteOf(lines[i + 1]) : null });
    }
  });
  return out;
}

export function parseCitedUrls(text: string): CitedUrl[] {
  const lines = text.split('\n');
  const out: CitedUrl[] = [];
  lines.forEach((line, i) => {
    if (/^\s*>/u.test(line)) return;
    const urls = [...line.matchAll(URL)].map((m) => m[0].replace(/[.,;:]+$/u, ''));
    if (urls.length === 0) return;
    const quotes: string[] = [];
    for (let k = i + 1; k < lines.length; k += 1) {
      const m = /^\s*>\s?(.*)$/u.exec(lines[k] as string);
      if (!m) break;
      if ((m[1] as string).trim() !== '') quotes.push((m[1] as string).trim());
    }
    urls.forEach((url, j) => out.push({ url, quotes: j === 0 ? quotes : [] }));
  });
  return out;
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
      urls.push({ url: rec['url'], status });
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

/** Human wording of a failed check, e.g. "does not match the file (quote mismatch)". */
export function describeStatus(status: string): string {
  switch (status) {
    case 'verified':
      return 'verified';
    case 'unquoted_verified_line':
      return 'exists but is not quoted';
    case 'missing_file':
      return 'names a file that does not exist';
    case 'missing_line':
      return 'points past the end of the file';
    case 'quote_mismatch':
      return 'quotes text that does not match the file';
    case 'outside_repo':
      return 'points outside the repository';
    case 'not_fetched':
      return 'cites a page that was not fetched';
    case 'quote_not_found':
      return 'quotes text not found on the fetched page';
    case 'unquoted':
      return 'cites the page without quoting it';
    default:
      return status === '' ? 'could not be checked' : `failed its check (${status})`;
  }
}
