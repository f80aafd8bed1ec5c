/**
 * Content search: grep every term (case-insensitive) across the repository, score files by how
 * many distinct terms they contain and how often, then read the top three files around the
 * line where the most terms meet, and cite the best lines of those windows.
 */
import type { Finding } from './answer.js';
import { pickLines, renderCandidateAnswer } from './answer.js';
import { definedName } from './definitions.js';
import type { Phase, SearchContext, Strategy } from './strategy.js';
import { compareStrings, failures, resultsOf } from './strategy.js';
import type { Term } from './terms.js';
import { escapeRegex, termWeight, termsIn } from './terms.js';
import type { Batch } from './transcript.js';
import type { Hit } from './tool-output.js';
import { parseGrep, parseRead, pathPrior, quotable } from './tool-output.js';

const TOP_FILES = 3;
const WINDOW_BEFORE = 8;
const WINDOW_LINES = 30;
const LINES_PER_FILE = 3;

interface FileScore {
  path: string;
  score: number;
  best: Hit;
  bestScore: number;
}

function lineScore(text: string, terms: readonly Term[]): number {
  const matched = termsIn(text, terms);
  const name = definedName(text);
  return termWeight(matched) + matched.length * 2 + (name === null ? 0 : 1 + termWeight(termsIn(name, terms)));
}

/**
 * The window start that shows the most distinct terms: hits of all terms in one file are
 * gathered, and each hit is tried as the anchor of the read window.
 */
function bestWindow(hits: readonly Hit[], terms: readonly Term[]): { best: Hit; bestScore: number } {
  const sorted = [...hits].sort((a, b) => a.line - b.line);
  let best = sorted[0] as Hit;
  let bestKey = [-1, -1, -1];
  for (const anchor of sorted) {
    const start = Math.max(1, anchor.line - WINDOW_BEFORE);
    const inWindow = sorted.filter((h) => h.line >= start && h.line < start + WINDOW_LINES);
    const distinct = new Set(inWindow.flatMap((h) => termsIn(h.text, terms)));
    const key = [termWeight([...distinct]), lineScore(anchor.text, terms), inWindow.length];
    const better = key.findIndex((v, i) => v !== bestKey[i]);
    if (better >= 0 && (key[better] as number) > (bestKey[better] as number)) {
      best = anchor;
      bestKey = key;
    }
  }
  return { best, bestScore: bestKey[0] ?? 0 };
}

/** Files ranked by distinct terms (weighted) × how often they occur × a source-file prior. */
export function scoreFiles(batch: Batch, terms: readonly Term[]): FileScore[] {
  const perFile = new Map<string, { counts: Map<Term, number>; hits: Hit[] }>();
  for (const r of batch) {
    if (r.name !== 'grep' || !r.ok) continue;
    const pattern = typeof r.args['pattern'] === 'string' ? r.args['pattern'] : '';
    const term = terms.find((t) => escapeRegex(t.stem) === pattern);
    for (const hit of parseGrep(r.text)) {
      const entry = perFile.get(hit.path) ?? { counts: new Map<Term, number>(), hits: [] };
      perFile.set(hit.path, entry);
      if (!entry.hits.some((h) => h.line === hit.line)) entry.hits.push(hit);
      if (term) entry.counts.set(term, (entry.counts.get(term) ?? 0) + 1);
    }
  }
  const scored: FileScore[] = [];
  for (const [path, e] of perFile) {
    let score = 0;
    for (const [term, n] of e.counts) score += term.weight * (1 + Math.log2(1 + n));
    score *= e.counts.size * pathPrior(path);
    scored.push({ path, score, ...bestWindow(e.hits, terms) });
  }
  return scored.sort((a, b) => b.score - a.score || compareStrings(a.path, b.path));
}

const grepTerms: Phase = (ctx) =>
  ctx.terms.map((t) => ({ name: 'grep', args: { pattern: escapeRegex(t.stem), ignore_case: true, max_matches: 200 } }));

const readTopFiles: Phase = (ctx, done) =>
  scoreFiles(done[0] ?? [], ctx.terms)
    .slice(0, TOP_FILES)
    .map((f) => ({ name: 'read', args: { path: f.path, offset: Math.max(1, f.best.line - WINDOW_BEFORE), limit: WINDOW_LINES } }));

function classify(path: string, line: number, text: string): Finding {
  const name = definedName(text);
  return name === null ? { path, line, text, kind: 'usage' } : { path, line, text, kind: 'definition', note: `defines ${name}` };
}

function answer(ctx: SearchContext, done: readonly Batch[]): string {
  const findings: Finding[] = [];
  const ranked = scoreFiles(done[0] ?? [], ctx.terms);
  for (const r of resultsOf(done.slice(1), 'read')) {
    const path = typeof r.args['path'] === 'string' ? r.args['path'] : '';
    const lines = pickLines(
      parseRead(r.text).filter((l) => quotable(l.text)),
      ctx.terms,
      LINES_PER_FILE,
      (text) => lineScore(text, ctx.terms),
    );
    for (const l of lines) findings.push(classify(path, l.line, l.text));
  }
  // Files beyond the reads still count as evidence when grep showed a whole line.
  for (const f of ranked.slice(TOP_FILES, TOP_FILES + 2)) {
    if (!f.best.cut && quotable(f.best.text)) findings.push(classify(f.path, f.best.line, f.best.text));
  }
  const matchedFiles = ranked.length;
  return renderCandidateAnswer({
    method: `searched file contents for each term (case-insensitive); ${matchedFiles} ${matchedFiles === 1 ? 'file' : 'files'} matched; read the top ${Math.min(TOP_FILES, matchedFiles)} around the lines where most terms meet.`,
    terms: ctx.terms,
    findings,
    problems: failures(done),
  });
}

export const contentSearch: Strategy = { name: 'content-search', phases: [grepTerms, readTopFiles], answer };
