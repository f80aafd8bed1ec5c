/**
 * Content search: grep every term (case-insensitive) across the repository, score files by how
 * many distinct terms they contain and how often, then read the top three files around the
 * line where the most terms meet, and cite the best lines of those windows.
 */
import type { Finding } from './answer.js';
import { pickLines, renderCandidateAnswer } from './answer.js';
import { definedName } from './definitions.js';
import { answerScore, rarityLine, withRarity } from './lead.js';
import type { Phase, SearchContext, Strategy } from './strategy.js';
import { compareStrings, failures, resultsOf } from './strategy.js';
import type { Term } from './terms.js';
import { escapeRegex, termWeight, termsIn } from './terms.js';
import type { Batch } from './transcript.js';
import type { Hit } from './tool-output.js';
import { parseFind, parseGrep, parseRead, pathPrior, quotable } from './tool-output.js';
import { requestEcho } from './request-echo.js';

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

/** A line's worth as a citation: how well it answers (lead.ts), plus how many terms it shows. */
function lineScore(text: string, terms: readonly Term[], context = ''): number {
  const matched = termsIn(text, terms);
  return answerScore(text, terms, context) + 0.5 * termWeight(matched) + matched.length;
}

/** The tool walks directories depth-first with sorted names: compare paths segment by segment. */
function walkOrder(a: string, b: string): number {
  const pa = a.split('/');
  const pb = b.split('/');
  for (let i = 0; i < Math.min(pa.length, pb.length); i += 1) {
    const c = compareStrings(pa[i] as string, pb[i] as string);
    if (c !== 0) return c;
  }
  return pa.length - pb.length;
}

/**
 * Per term, how many files contain it, over the repository's files (from the term greps and the
 * file list). A grep that reached its match limit saw only the files up to its last hit, in walk
 * order; the file list says what share of the repository that prefix is, and the count is
 * scaled up by it. Without the scaling, the commonest words (a package's own name) would look as
 * rare as the words that matter, since both stop at the same limit.
 */
export function termFiles(batch: Batch, terms: readonly Term[]): { filesWith: Map<string, number>; files: number } {
  const perTerm = new Map<string, { files: Set<string>; capped: boolean }>();
  const all = new Set<string>();
  let listed: string[] = [];
  for (const r of batch) {
    if (r.name === 'find' && r.ok) listed = [...parseFind(r.text).files].sort(walkOrder);
    if (r.name !== 'grep' || !r.ok) continue;
    const pattern = typeof r.args['pattern'] === 'string' ? r.args['pattern'] : '';
    const term = terms.find((t) => escapeRegex(t.stem) === pattern);
    const entry = term ? (perTerm.get(term.stem) ?? { files: new Set<string>(), capped: false }) : null;
    for (const hit of parseGrep(r.text)) {
      all.add(hit.path);
      entry?.files.add(hit.path);
    }
    if (term && entry) {
      entry.capped ||= r.text.includes('[match limit reached');
      perTerm.set(term.stem, entry);
    }
  }
  const filesWith = new Map<string, number>();
  let files = Math.max(all.size, listed.length);
  for (const [stem, e] of perTerm) {
    let count = e.files.size;
    if (e.capped && listed.length > 0) {
      const last = [...e.files].sort(walkOrder).pop() as string;
      const scanned = listed.findIndex((p) => walkOrder(p, last) > 0);
      if (scanned > 0) count = Math.round((count * listed.length) / scanned);
    }
    filesWith.set(stem, count);
    files = Math.max(files, count);
  }
  return { filesWith, files };
}

/** The request's terms weighted by how few files contain them. */
function rareTerms(ctx: SearchContext, done: readonly Batch[]): Term[] {
  const { filesWith, files } = termFiles(done[0] ?? [], ctx.terms);
  return withRarity(ctx.terms, filesWith, files);
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

/**
 * Files ranked by distinct terms (weighted) × how often they occur × a source-file prior. Lines
 * that only repeat the request (`echoes`, request-echo.ts) are not hits: a file that quotes the
 * question is not where its answer is.
 */
export function scoreFiles(batch: Batch, terms: readonly Term[], echoes: (text: string) => boolean = () => false): FileScore[] {
  const perFile = new Map<string, { counts: Map<Term, number>; hits: Hit[] }>();
  for (const r of batch) {
    if (r.name !== 'grep' || !r.ok) continue;
    const pattern = typeof r.args['pattern'] === 'string' ? r.args['pattern'] : '';
    const term = terms.find((t) => escapeRegex(t.stem) === pattern);
    for (const hit of parseGrep(r.text)) {
      if (echoes(hit.text)) continue;
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

/** How many files the repository lists: the measure the term counts are scaled to (termFiles). */
export const LIST_FILES = { name: 'find', args: { pattern: '*', type: 'file', max_results: 2000 } } as const;

const grepTerms: Phase = (ctx) => [
  ...ctx.terms.map((t) => ({ name: 'grep', args: { pattern: escapeRegex(t.stem), ignore_case: true, max_matches: 200 } })),
  ...(ctx.terms.length > 0 ? [{ name: LIST_FILES.name, args: { ...LIST_FILES.args } }] : []),
];

const readTopFiles: Phase = (ctx, done) =>
  scoreFiles(done[0] ?? [], rareTerms(ctx, done), requestEcho(ctx.fields))
    .slice(0, TOP_FILES)
    .map((f) => ({ name: 'read', args: { path: f.path, offset: Math.max(1, f.best.line - WINDOW_BEFORE), limit: WINDOW_LINES } }));

function classify(path: string, line: number, text: string): Finding {
  const name = definedName(text);
  return name === null ? { path, line, text, kind: 'usage' } : { path, line, text, kind: 'definition', note: `defines ${name}` };
}

function answer(ctx: SearchContext, done: readonly Batch[]): string {
  const findings: Finding[] = [];
  const terms = rareTerms(ctx, done);
  const echoes = requestEcho(ctx.fields);
  const ranked = scoreFiles(done[0] ?? [], terms, echoes);
  for (const r of resultsOf(done.slice(1), 'read')) {
    const path = typeof r.args['path'] === 'string' ? r.args['path'] : '';
    const base = path.split('/').pop() ?? path;
    const lines = pickLines(
      parseRead(r.text).filter((l) => quotable(l.text) && !echoes(l.text)),
      terms,
      LINES_PER_FILE,
      (text) => lineScore(text, terms, base),
    );
    for (const l of lines) findings.push(classify(path, l.line, l.text));
  }
  // Files beyond the reads still count as evidence when grep showed a whole line.
  for (const f of ranked.slice(TOP_FILES, TOP_FILES + 2)) {
    if (!f.best.cut && quotable(f.best.text)) findings.push(classify(f.path, f.best.line, f.best.text));
  }
  const matchedFiles = ranked.length;
  const { filesWith, files } = termFiles(done[0] ?? [], ctx.terms);
  return renderCandidateAnswer({
    method: `searched file contents for each term (case-insensitive); ${matchedFiles} ${matchedFiles === 1 ? 'file' : 'files'} matched; read the top ${Math.min(TOP_FILES, matchedFiles)} around the lines where most terms meet.`,
    rarity: rarityLine(ctx.terms, filesWith, files),
    terms,
    findings,
    problems: failures(done),
  });
}

export const contentSearch: Strategy = { name: 'content-search', phases: [grepTerms, readTopFiles], answer };
