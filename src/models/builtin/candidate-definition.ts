/**
 * Definition search: grep for lines that define a name containing each term (functions,
 * classes, assignments of functions, exports, methods), rank definitions by the terms they
 * carry, read around the top three and cite the definitions with their nearby uses. When no
 * definition matches, fall back to one grep of all terms and read around the best uses.
 */
import type { Finding } from './answer.js';
import { pickLines, renderCandidateAnswer } from './answer.js';
import { termsAlternation } from './candidate-path.js';
import { definedName, definitionPattern } from './definitions.js';
import { answerScore, withRarity } from './lead.js';
import type { Phase, SearchContext, Strategy } from './strategy.js';
import { compareStrings, failures, resultsOf } from './strategy.js';
import type { Term } from './terms.js';
import { termWeight, termsIn } from './terms.js';
import type { Batch } from './transcript.js';
import type { Hit } from './tool-output.js';
import { parseGrep, parseRead, pathPrior, quotable } from './tool-output.js';
import { requestEcho } from './request-echo.js';

const TOP_DEFINITIONS = 3;
const EXTRA_DEFINITIONS = 3;
const BEFORE = 3;
const WINDOW_LINES = 25;
const USES_PER_WINDOW = 2;
const NEAR_LINES = 15;

interface Ranked extends Hit {
  score: number;
  name: string | null;
}

function rank(hits: readonly Hit[], terms: readonly Term[]): Ranked[] {
  const seen = new Set<string>();
  const out: Ranked[] = [];
  for (const h of hits) {
    const key = `${h.path}:${h.line}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const name = h.cut ? null : definedName(h.text);
    const inLine = termsIn(h.text, terms);
    // Names that carry the terms beat lines that merely mention them near a keyword (lead.ts).
    const answers = h.cut ? 0.5 * termWeight(inLine) : answerScore(h.text, terms, h.path.split('/').pop() ?? h.path);
    const score = (answers + 0.5 * termWeight(inLine) + inLine.length) * pathPrior(h.path);
    out.push({ ...h, score, name });
  }
  return out.sort((a, b) => b.score - a.score || compareStrings(a.path, b.path) || a.line - b.line);
}

function definitionHits(done: readonly Batch[]): Hit[] {
  return resultsOf(done.slice(0, 1), 'grep').flatMap((r) => parseGrep(r.text));
}

function usageHits(done: readonly Batch[]): Hit[] {
  return resultsOf(done.slice(1, 2), 'grep').flatMap((r) => parseGrep(r.text));
}

/**
 * The request's terms weighted by rarity among the definitions found: a term many definitions
 * carry (the package's own name) tells little apart.
 */
function rareTerms(ctx: SearchContext, done: readonly Batch[]): Term[] {
  const perTerm = new Map<string, Set<string>>();
  const all = new Set<string>();
  for (const r of resultsOf(done.slice(0, 1), 'grep')) {
    const term = ctx.terms.find((t) => definitionPattern(t.stem) === r.args['pattern']);
    for (const h of parseGrep(r.text)) {
      all.add(h.path);
      if (!term) continue;
      const set = perTerm.get(term.stem) ?? new Set<string>();
      set.add(h.path);
      perTerm.set(term.stem, set);
    }
  }
  return withRarity(ctx.terms, new Map([...perTerm].map(([stem, set]) => [stem, set.size])), all.size);
}

/** The top hits, at most one per neighbourhood, so three reads show three different places. */
function targets(ctx: SearchContext, done: readonly Batch[]): Ranked[] {
  // A line that only repeats the request is not a place to read (request-echo.ts).
  const echoes = requestEcho(ctx.fields);
  const defs = definitionHits(done).filter((h) => !echoes(h.text));
  const ranked = rank(defs.length > 0 ? defs : usageHits(done).filter((h) => !echoes(h.text)), rareTerms(ctx, done));
  const picked: Ranked[] = [];
  for (const r of ranked) {
    if (picked.some((p) => p.path === r.path && Math.abs(p.line - r.line) < NEAR_LINES)) continue;
    picked.push(r);
    if (picked.length >= TOP_DEFINITIONS + EXTRA_DEFINITIONS) break;
  }
  return picked;
}

const grepDefinitions: Phase = (ctx) =>
  ctx.terms.map((t) => ({ name: 'grep', args: { pattern: definitionPattern(t.stem), ignore_case: true, max_matches: 100 } }));

const grepUsesIfNoDefinition: Phase = (ctx, done) =>
  definitionHits(done).length > 0 || ctx.terms.length === 0
    ? []
    : [{ name: 'grep', args: { pattern: termsAlternation(ctx.terms), ignore_case: true, max_matches: 200 } }];

const readAround: Phase = (ctx, done) =>
  targets(ctx, done)
    .slice(0, TOP_DEFINITIONS)
    .map((t) => ({ name: 'read', args: { path: t.path, offset: Math.max(1, t.line - BEFORE), limit: WINDOW_LINES } }));

function finding(path: string, line: number, text: string): Finding {
  const name = definedName(text);
  return name === null ? { path, line, text, kind: 'usage' } : { path, line, text, kind: 'definition', note: `defines ${name}` };
}

function answer(ctx: SearchContext, done: readonly Batch[]): string {
  const picked = targets(ctx, done);
  const terms = rareTerms(ctx, done);
  const reads = resultsOf(done.slice(2, 3), 'read');
  const findings: Finding[] = [];
  const echoes = requestEcho(ctx.fields);
  const citable = (text: string): boolean => quotable(text) && !echoes(text);
  for (const [i, t] of picked.entries()) {
    if (i < TOP_DEFINITIONS) {
      const read = reads.find((r) => r.args['path'] === t.path && typeof r.args['offset'] === 'number' && t.line >= r.args['offset'] && t.line < r.args['offset'] + WINDOW_LINES);
      const lines = read ? parseRead(read.text) : [];
      const own = lines.find((l) => l.line === t.line);
      if (own && citable(own.text)) findings.push(finding(t.path, own.line, own.text));
      else if (!t.cut && citable(t.text)) findings.push(finding(t.path, t.line, t.text));
      const uses = pickLines(
        lines.filter((l) => l.line !== t.line && citable(l.text)),
        terms,
        USES_PER_WINDOW,
        (text) => termWeight(termsIn(text, terms)),
      );
      for (const u of uses) findings.push(finding(t.path, u.line, u.text));
    } else if (!t.cut && citable(t.text)) {
      findings.push(finding(t.path, t.line, t.text));
    }
  }
  const defCount = definitionHits(done).length;
  return renderCandidateAnswer({
    method:
      defCount > 0
        ? `searched for definitions (functions, classes, assignments, exports, methods) whose names contain a term; ${defCount} matched; read around the top ${Math.min(TOP_DEFINITIONS, picked.length)}.`
        : 'searched for definitions whose names contain a term and found none, so searched for the terms themselves and read around the best uses.',
    terms: terms,
    findings,
    problems: failures(done),
  });
}

export const definitionSearch: Strategy = { name: 'definition-search', phases: [grepDefinitions, grepUsesIfNoDefinition, readAround], answer };
