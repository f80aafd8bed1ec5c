/**
 * Passages and BM25 ranking for the research candidate.
 *
 * Passages are paragraphs (blank-line separated); a paragraph longer than the window is cut
 * into ~500-character windows on whitespace. Every passage is an exact substring of the page,
 * so its lines can be quoted and checked verbatim.
 */
import type { Term } from './terms.js';

export interface Passage {
  /** Index in the page's passage list. */
  index: number;
  text: string;
}

export const PASSAGE_CHARS = 500;
const MIN_PASSAGE_CHARS = 20;

function windows(paragraph: string, size: number): string[] {
  const out: string[] = [];
  let rest = paragraph;
  while (rest.length > size) {
    // Cut at the last whitespace inside the window (whole words), else hard at `size`.
    let cut = rest.lastIndexOf(' ', size);
    const nl = rest.lastIndexOf('\n', size);
    cut = Math.max(cut, nl);
    if (cut < size / 2) cut = size;
    out.push(rest.slice(0, cut).trim());
    rest = rest.slice(cut).trim();
  }
  if (rest.trim() !== '') out.push(rest.trim());
  return out;
}

export function splitPassages(content: string, size: number = PASSAGE_CHARS): Passage[] {
  const paragraphs = content.replace(/\r\n?/gu, '\n').split(/\n[ \t]*\n+/u);
  const out: Passage[] = [];
  for (const p of paragraphs) {
    const trimmed = p.trim();
    if (trimmed.length < MIN_PASSAGE_CHARS && !/[A-Za-z]{4,}/u.test(trimmed)) continue;
    for (const w of windows(trimmed, size)) if (w !== '') out.push({ index: out.length, text: w });
  }
  return out;
}

/** Lowercase word tokens; camelCase and snake_case split as well as kept whole. */
export function tokenize(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/[\p{L}\p{N}_$]+/gu)) {
    const word = m[0];
    out.push(word.toLowerCase());
    const parts = word.split(/_|(?<=[a-z])(?=[A-Z])/u);
    if (parts.length > 1) for (const p of parts) if (p !== '') out.push(p.toLowerCase());
  }
  return out;
}

export interface Scored<T> {
  item: T;
  score: number;
  matched: Term[];
}

/**
 * Okapi BM25 (k1 = 1.2, b = 0.75) with the query terms' weights as multipliers. A token
 * matches a term when it contains the term's stem (`parsing` ⊃ `pars`), as grep would.
 */
export function bm25<T>(docs: readonly T[], textOf: (doc: T) => string, terms: readonly Term[], k1 = 1.2, b = 0.75): Scored<T>[] {
  const tokens = docs.map((d) => tokenize(textOf(d)));
  const n = docs.length;
  const avg = n === 0 ? 0 : tokens.reduce((s, t) => s + t.length, 0) / n;
  const tf = tokens.map((toks) => terms.map((t) => toks.reduce((c, tok) => c + (tok.includes(t.stem) ? 1 : 0), 0)));
  const df = terms.map((_, j) => tf.reduce((c, row) => c + ((row[j] ?? 0) > 0 ? 1 : 0), 0));
  const idf = df.map((d) => Math.log(1 + (n - d + 0.5) / (d + 0.5)));
  return docs.map((item, i) => {
    const len = tokens[i]?.length ?? 0;
    let score = 0;
    const matched: Term[] = [];
    terms.forEach((t, j) => {
      const f = tf[i]?.[j] ?? 0;
      if (f === 0) return;
      matched.push(t);
      score += t.weight * (idf[j] ?? 0) * ((f * (k1 + 1)) / (f + k1 * (1 - b + (b * len) / (avg || 1))));
    });
    return { item, score, matched };
  });
}
