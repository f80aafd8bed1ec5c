/**
 * The one citation parser: how an answer cites repository lines and URLs, the check statuses
 * and their wording, and the pure URL check against fetched pages. The supervisor's checks
 * (src/workflow/citations.ts, which read the repository) and the builtin engine's evaluator and
 * merger (src/models/builtin/citations.ts) both read answers through it, so they cannot disagree.
 *
 * Citation format (candidateSystemPrompt): inline code holding `path:line`, `path:start-end`,
 * `path:line:col` or `path#Lline` / `path#Lstart-Lend`, optionally followed on the next
 * non-empty line by a block quote, `> \`quoted line\`` or `> quoted line`; consecutive quote
 * lines form one quote (useful for ranges). Lines inside fenced code blocks are not scanned.
 * A quote attaches to the last citation on the line before it.
 *
 * Matching: whitespace-collapsed, the quote equals the cited text or is a substring of it of
 * at least 8 characters (shorter fragments such as `}` prove nothing).
 */
export const CITATION_LIMITS = {
  /** Citations checked per answer; later ones are ignored. */
  maxCitations: 200,
  /** Files above this size are reported as missing_file, never read. */
  maxFileBytes: 2 * 1024 * 1024,
  /** Minimum collapsed length of a quote that is a substring rather than the whole line. */
  minSubstringChars: 8,
  /** `actual` is cut to this many characters in a check result. */
  maxActualChars: 500,
} as const;

export const CITATION_STATUSES = ['verified', 'unquoted_verified_line', 'missing_file', 'missing_line', 'quote_mismatch', 'outside_repo'] as const;
export type CitationStatus = (typeof CITATION_STATUSES)[number];

export const URL_CHECK_STATUSES = ['verified', 'not_fetched', 'quote_not_found', 'unquoted'] as const;
export type UrlCheckStatus = (typeof URL_CHECK_STATUSES)[number];

export interface Citation {
  /** The text inside the backticks, e.g. `src/app.ts:42`. */
  citation: string;
  /** The path as written (prefix `/repo/` or `./` removed). */
  path: string;
  line: number;
  endLine?: number;
  quoted?: string;
}

export interface CitationCheck {
  citation: string;
  path: string;
  line: number;
  endLine?: number;
  status: CitationStatus;
  quoted?: string;
  actual?: string;
}

export interface UrlCitation {
  url: string;
  quoted?: string;
}

export interface UrlCheck {
  url: string;
  status: UrlCheckStatus;
  quoted?: string;
}

export interface FetchedPage {
  url: string;
  content: string;
}

// path (no whitespace/backtick), then `:line[-end][:col]` or `#Lline[-[L]end]`. The path is
// non-greedy so `a.ts:4:2` parses as path a.ts, line 4, column 2.
const CITATION_RE = /`([^`\s]+?)(?::L?(\d{1,9})(?:[-–]L?(\d{1,9}))?(?::\d{1,9})?|#L(\d{1,9})(?:-L?(\d{1,9}))?)`/g;
const URL_RE = /https?:\/\/[^\s<>`"'[\]{}|\\^]+/g;
const FENCE_RE = /^\s{0,3}(```|~~~)/;

export function collapseWhitespace(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

function isQuoteLine(line: string): boolean {
  return line.trimStart().startsWith('>');
}

/** `> \`text\`` → `text`; `> text` → `text`; a double-backtick span loses one padding space. */
function quoteLineText(line: string): string {
  const body = line.trimStart().slice(1).trim();
  const m = /^(`+)([\s\S]*)\1$/.exec(body);
  if (m === null || m[2] === undefined) return body;
  const inner = m[2];
  return (m[1] ?? '').length > 1 && inner.startsWith(' ') && inner.endsWith(' ') && inner.length >= 2 ? inner.slice(1, -1) : inner;
}

interface ScannedLine {
  text: string;
  index: number;
}

/** Splits Markdown into lines and lists the scannable ones (outside code fences). */
function scan(text: string): { lines: string[]; scannable: ScannedLine[] } {
  const lines = text.split(/\r?\n/);
  const scannable: ScannedLine[] = [];
  let fence: string | undefined;
  lines.forEach((line, index) => {
    const m = FENCE_RE.exec(line);
    if (fence !== undefined) {
      if (m !== null && m[1] === fence) fence = undefined;
      return;
    }
    if (m !== null && m[1] !== undefined) {
      fence = m[1];
      return;
    }
    scannable.push({ text: line, index });
  });
  return { lines, scannable };
}

/**
 * The block quote after line `index`, if the next non-empty line starts one: its consecutive
 * `>` lines joined with `\n`, and their indices (so they are not scanned as citations).
 */
function quoteAfter(lines: readonly string[], index: number): { quoted: string; consumed: number[] } | undefined {
  let i = index + 1;
  while (i < lines.length && (lines[i] ?? '').trim() === '') i += 1;
  const consumed: number[] = [];
  const parts: string[] = [];
  while (i < lines.length && isQuoteLine(lines[i] ?? '')) {
    consumed.push(i);
    parts.push(quoteLineText(lines[i] ?? ''));
    i += 1;
  }
  const quoted = parts.join('\n');
  return consumed.length > 0 && quoted.trim() !== '' ? { quoted, consumed } : undefined;
}

function normalisePath(raw: string): string {
  let p = raw;
  if (p.startsWith('/repo/')) p = p.slice('/repo/'.length);
  while (p.startsWith('./')) p = p.slice(2);
  return p;
}

/** Things in backticks that look like `host:port`, not a file citation. */
function looksLikeNonPath(p: string): boolean {
  return p.includes('://') || /^(localhost|[\d.]+|\[[0-9a-f:]+\])$/i.test(p) || p === '';
}

/**
 * The shared scan of both citation kinds: each scannable line yields its citations; a block quote
 * right after the line belongs to the last of them, and its lines are not scanned again.
 */
function collectQuoted<T extends { quoted?: string }>(text: string, max: number, findInLine: (line: string) => T[]): T[] {
  const { lines, scannable } = scan(text);
  const consumed = new Set<number>();
  const out: T[] = [];
  for (const { text: line, index } of scannable) {
    if (out.length >= max) break;
    if (consumed.has(index)) continue;
    const found = findInLine(line);
    if (found.length === 0) continue;
    const quote = quoteAfter(lines, index);
    const last = found[found.length - 1];
    if (quote !== undefined && last !== undefined) {
      last.quoted = quote.quoted;
      for (const i of quote.consumed) consumed.add(i);
    }
    out.push(...found.slice(0, max - out.length));
  }
  return out;
}

/** Extracts at most `max` repository citations, in order of appearance. */
export function extractCitations(text: string, max: number = CITATION_LIMITS.maxCitations): Citation[] {
  return collectQuoted(text, max, (line) => {
    const found: Citation[] = [];
    for (const m of line.matchAll(CITATION_RE)) {
      const rawPath = m[1] ?? '';
      const p = normalisePath(rawPath);
      if (looksLikeNonPath(p)) continue;
      const start = Number(m[2] ?? m[4]);
      const endRaw = m[3] ?? m[5];
      const citation: Citation = { citation: m[0].slice(1, -1), path: p, line: start };
      if (endRaw !== undefined) citation.endLine = Number(endRaw);
      found.push(citation);
    }
    return found;
  });
}

export function cutActual(text: string): string {
  const max = CITATION_LIMITS.maxActualChars;
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

export function quoteMatches(quoted: string, actual: string): boolean {
  const q = collapseWhitespace(quoted);
  const a = collapseWhitespace(actual);
  if (q === '') return false;
  return q === a || (q.length >= CITATION_LIMITS.minSubstringChars && a.includes(q));
}

function trimUrl(raw: string): string {
  let url = raw;
  // A Markdown link `[t](url)` or a parenthesised remark ends the URL at its first unbalanced
  // `)`; balanced parentheses (`/wiki/Foo_(bar)`) stay part of it.
  let depth = 0;
  for (let i = 0; i < url.length; i += 1) {
    if (url[i] === '(') depth += 1;
    else if (url[i] === ')') {
      if (depth === 0) {
        url = url.slice(0, i);
        break;
      }
      depth -= 1;
    }
  }
  // Sentence punctuation and Markdown emphasis after a URL are not part of it.
  while (/[.,;:!?*_~(]$/.test(url)) url = url.slice(0, -1);
  return url;
}

/** Comparison key: WHATWG-normalised, fragment dropped; unparsable URLs compare as written. */
function urlKey(url: string): string {
  try {
    const u = new URL(url);
    u.hash = '';
    return u.href;
  } catch {
    return url;
  }
}

/** Extracts at most `max` URL citations (bare, `<url>`, `[text](url)` or in backticks). */
export function extractUrlCitations(text: string, max: number = CITATION_LIMITS.maxCitations): UrlCitation[] {
  return collectQuoted(text, max, (line) => {
    const found: UrlCitation[] = [];
    for (const m of line.matchAll(URL_RE)) {
      const url = trimUrl(m[0]);
      if (url.length > 'https://'.length) found.push({ url });
    }
    return found;
  });
}

/**
 * Checks cited URLs against what the run fetched: a URL nobody fetched is `not_fetched`; a quote
 * must occur (whitespace-collapsed, at least 8 characters) in that URL's fetched content.
 */
export function checkUrlCitations(text: string, fetched: ReadonlyArray<FetchedPage>): UrlCheck[] {
  const contents = new Map<string, string[]>();
  for (const page of fetched) {
    const key = urlKey(page.url);
    const list = contents.get(key) ?? [];
    list.push(collapseWhitespace(page.content));
    contents.set(key, list);
  }
  return extractUrlCitations(text).map((citation): UrlCheck => {
    const base: UrlCheck = { url: citation.url, status: 'not_fetched' };
    if (citation.quoted !== undefined) base.quoted = citation.quoted;
    const pages = contents.get(urlKey(citation.url));
    if (pages === undefined) return base;
    const q = citation.quoted === undefined ? '' : collapseWhitespace(citation.quoted);
    if (q.length < CITATION_LIMITS.minSubstringChars) return { ...base, status: 'unquoted' };
    return { ...base, status: pages.some((content) => content.includes(q)) ? 'verified' : 'quote_not_found' };
  });
}

export type CitationSummary = { total: number } & Record<CitationStatus, number>;
export type UrlCheckSummary = { total: number } & Record<UrlCheckStatus, number>;

/**
 * Counts per status. The result always has a zero for every status of both kinds (so an empty
 * list summarises the same whichever kind it was), plus `total`.
 */
export function summarizeChecks(checks: readonly CitationCheck[]): CitationSummary;
export function summarizeChecks(checks: readonly UrlCheck[]): UrlCheckSummary;
export function summarizeChecks(checks: readonly { status: string }[]): Record<string, number> {
  const summary: Record<string, number> = { total: checks.length };
  for (const status of [...CITATION_STATUSES, ...URL_CHECK_STATUSES]) summary[status] = 0;
  for (const check of checks) summary[check.status] = (summary[check.status] ?? 0) + 1;
  return summary;
}

/** One citation of a delivered answer that its check could not confirm. */
export interface UnconfirmedCitation {
  kind: 'repository' | 'web';
  /** `path:line` as written, or the URL. */
  citation: string;
  status: CitationStatus | UrlCheckStatus;
  quoted?: string;
}

/** What the supervisor reports about the citations of the answer it delivers. */
export interface DeliveredCitations {
  checked: number;
  confirmed: number;
  unconfirmed: UnconfirmedCitation[];
}

/**
 * A check confirms a citation when the cited place exists as cited and its quote, if any, is
 * there: a quoted line or passage must match; an unquoted `path:line` must exist; an unquoted
 * URL must be a page this task fetched.
 */
export function isConfirmed(status: string): boolean {
  return status === 'verified' || status === 'unquoted_verified_line' || status === 'unquoted';
}

/** Human wording of a check's status, e.g. "quotes text that does not match the file". */
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
