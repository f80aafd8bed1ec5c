/**
 * Path search: list the root and find files and directories whose names contain a term
 * (case-insensitive globs), rank paths by the terms in their names (base name over directory),
 * read the heads of the top files, then grep the terms inside those files only and cite the
 * best lines. When no name matches a term, fall back to the shallowest source files.
 */
import type { Finding } from './answer.js';
import { pickLines, renderCandidateAnswer } from './answer.js';
import { definedName } from './definitions.js';
import { answerScore } from './lead.js';
import type { Phase, SearchContext, Strategy } from './strategy.js';
import { compareStrings, failures, resultsOf } from './strategy.js';
import type { Term } from './terms.js';
import { escapeRegex, termWeight, termsIn } from './terms.js';
import type { Batch } from './transcript.js';
import { isSourcePath, parseFind, parseGrep, parseLs, parseRead, pathPrior, quotable } from './tool-output.js';
import { requestEcho } from './request-echo.js';

const NAME_TERMS = 4;
const TOP_FILES = 3;
const HEAD_LINES = 60;
const LINES_PER_FILE = 3;
export const SOURCE_GLOB = '*.{js,mjs,cjs,jsx,ts,mts,cts,tsx,py,go,rs,java,kt,scala,rb,php,cs,swift,c,h,cc,cpp,hpp,m,lua,sh,ex,exs,hs,ml,dart,vue,svelte}';

/** `cidr` → `[cC][iI][dD][rR]`: the find tool's globs are case-sensitive. */
export function caseInsensitiveGlob(stem: string): string {
  let out = '';
  for (const ch of stem) {
    if (/[a-z]/iu.test(ch)) out += `[${ch.toLowerCase()}${ch.toUpperCase()}]`;
    else if (/[\w$-]/u.test(ch)) out += ch;
    else out += `\\${ch}`;
  }
  return out;
}

interface PathScore {
  path: string;
  score: number;
  terms: Term[];
}

function depth(path: string): number {
  return path.split('/').length - 1;
}

/** Paths ranked by terms in the base name (×3) or a directory name (×1), times a source prior. */
export function scorePaths(batch: Batch, terms: readonly Term[]): PathScore[] {
  const files = new Set<string>();
  for (const r of batch) {
    if (!r.ok) continue;
    if (r.name === 'find') for (const f of parseFind(r.text).files) files.add(f);
    if (r.name === 'ls') for (const f of parseLs(r.text).files) files.add(f);
  }
  const scored: PathScore[] = [];
  for (const path of files) {
    const segments = path.toLowerCase().split('/');
    const base = segments.pop() ?? '';
    let score = 0;
    const matched: Term[] = [];
    for (const t of terms) {
      if (base.includes(t.stem)) score += 3 * t.weight;
      else if (segments.some((s) => s.includes(t.stem))) score += t.weight;
      else continue;
      matched.push(t);
    }
    scored.push({ path, score: score * pathPrior(path), terms: matched });
  }
  const anyMatch = scored.some((s) => s.score > 0);
  if (!anyMatch) {
    // No name carries a term: the shallowest source files are the best guess at the core
    // (other files only when the repository has no source file at all).
    const anySource = scored.some((s) => isSourcePath(s.path));
    for (const s of scored) s.score = !anySource || isSourcePath(s.path) ? pathPrior(s.path) / (1 + depth(s.path)) : 0;
  }
  return scored
    .filter((s) => s.score > 0)
    .sort((a, b) => b.score - a.score || depth(a.path) - depth(b.path) || compareStrings(a.path, b.path));
}

const findNames: Phase = (ctx) => [
  { name: 'ls', args: { path: '.' } },
  ...ctx.terms.slice(0, NAME_TERMS).map((t) => ({ name: 'find', args: { pattern: `**/*${caseInsensitiveGlob(t.stem)}*`, max_results: 200 } })),
  { name: 'find', args: { pattern: SOURCE_GLOB, type: 'file', max_results: 500 } },
];

const topFiles = (ctx: SearchContext, done: readonly Batch[]): PathScore[] => scorePaths(done[0] ?? [], ctx.terms).slice(0, TOP_FILES);

const readHeads: Phase = (ctx, done) => topFiles(ctx, done).map((f) => ({ name: 'read', args: { path: f.path, offset: 1, limit: HEAD_LINES } }));

export function termsAlternation(terms: readonly Term[]): string {
  return terms.map((t) => escapeRegex(t.stem)).join('|');
}

const grepInFiles: Phase = (ctx, done) =>
  ctx.terms.length === 0
    ? []
    : topFiles(ctx, done).map((f) => ({ name: 'grep', args: { pattern: termsAlternation(ctx.terms), path: f.path, ignore_case: true, max_matches: 200 } }));

/** A line's worth as a citation: how well it answers (lead.ts), plus how many terms it shows. */
function lineScore(text: string, terms: readonly Term[], context: string): number {
  const matched = termsIn(text, terms);
  return answerScore(text, terms, context) + 0.5 * termWeight(matched) + matched.length;
}

function classify(path: string, line: number, text: string, kind: Finding['kind'] = 'usage', note?: string): Finding {
  const name = definedName(text);
  if (name !== null) return { path, line, text, kind: 'definition', note: `defines ${name}` };
  return note === undefined ? { path, line, text, kind } : { path, line, text, kind, note };
}

function answer(ctx: SearchContext, done: readonly Batch[]): string {
  const ranked = topFiles(ctx, done);
  const findings: Finding[] = [];
  const heads = resultsOf(done.slice(1, 2), 'read');
  const greps = resultsOf(done.slice(2, 3), 'grep');
  // A line that only repeats the request is not evidence (request-echo.ts).
  const echoes = requestEcho(ctx.fields);
  const citable = (text: string): boolean => quotable(text) && !echoes(text);
  for (const file of ranked) {
    const note = file.terms.length > 0 ? `file name matches ${file.terms.map((t) => t.word).join(', ')}` : undefined;
    const grep = greps.find((g) => g.args['path'] === file.path);
    const head = heads.find((h) => h.args['path'] === file.path);
    const hits = grep ? parseGrep(grep.text).filter((h) => !h.cut && citable(h.text)) : [];
    const base = file.path.split('/').pop() ?? file.path;
    const best = pickLines(hits, ctx.terms, LINES_PER_FILE, (text) => lineScore(text, ctx.terms, base));
    for (const h of best) findings.push(classify(file.path, h.line, h.text, 'usage', note));
    if (best.length === 0 && head && note !== undefined) {
      // The name matched but no line did: cite the first definition (or first line) of the head.
      const lines = parseRead(head.text).filter((l) => citable(l.text));
      const first = lines.find((l) => definedName(l.text) !== null) ?? lines[0];
      if (first) findings.push(classify(file.path, first.line, first.text, 'file head', note));
    }
  }
  const nameMatches = ranked.filter((f) => f.terms.length > 0).length;
  return renderCandidateAnswer({
    method:
      `matched file and directory names against the terms (${nameMatches > 0 ? `${nameMatches} of the top files have a matching name` : 'no name matched, so the shallowest source files were taken'}); ` +
      (ranked.length === 1 ? 'read the head of the top file, then searched inside it for the terms.' : `read the heads of the top ${ranked.length} files, then searched inside them for the terms.`),
    terms: ctx.terms,
    findings,
    problems: failures(done),
  });
}

export const pathSearch: Strategy = { name: 'path-search', phases: [findNames, readHeads, grepInFiles], answer };
