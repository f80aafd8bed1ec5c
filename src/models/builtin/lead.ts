/**
 * Which line answers the question, for the builtin candidates and merger: the lead of every
 * answer is its best line, so all of them rank lines the same way.
 *
 *   - Terms weigh by how rare they are: a word every file contains (the package's own name, a
 *     word like "logger" in a logging library) says little about where to look, so a term's
 *     weight is scaled by its inverse document frequency over the files the search saw.
 *   - A definition of behaviour whose name carries the terms (`refill()` for "where the bucket
 *     refills tokens") answers better than a type that merely names the concept
 *     (`class TokenBucket`), which answers better than a line that only mentions the words. A
 *     function inherits the terms of what encloses it (its file's name, the type declared above
 *     it), as a method of `TokenBucket` in `token-bucket.ts` is about token buckets.
 */
import { definitionOf } from './definitions.js';
import type { Term } from './terms.js';
import { escapeRegex, termWeight, termsIn } from './terms.js';
import { pathPrior } from './tool-output.js';

/** The weight a term keeps however common it is: common words still break ties. */
const RARITY_FLOOR = 0.15;
const KIND_FACTOR = { callable: 1.5, type: 1, value: 0.7 } as const;

/**
 * Terms reweighted by rarity: BM25's idf over `files` files, of which `filesWith(stem)` contain
 * the term, scaled so the rarest term keeps its weight. Terms no file contains keep theirs.
 */
export function withRarity(terms: readonly Term[], filesWith: ReadonlyMap<string, number>, files: number): Term[] {
  const idf = (df: number): number => Math.log(1 + (files - df + 0.5) / (df + 0.5));
  const seen = terms.map((t) => filesWith.get(t.stem) ?? 0).filter((n) => n > 0);
  if (seen.length === 0 || files <= 0) return [...terms];
  const top = Math.max(...seen.map(idf));
  if (!(top > 0)) return [...terms];
  return terms.map((t) => {
    const df = filesWith.get(t.stem) ?? 0;
    if (df === 0) return t;
    const factor = RARITY_FLOOR + (1 - RARITY_FLOOR) * (idf(Math.min(df, files)) / top);
    return { ...t, weight: Math.round(t.weight * factor * 1000) / 1000 };
  });
}

const RARITY_LINE = /^Term rarity \(files containing each term, of (\d+) files containing any\): (.*)$/mu;

/** The line a candidate states its term counts in, so the merger can weigh terms the same way. */
export function rarityLine(terms: readonly Term[], filesWith: ReadonlyMap<string, number>, files: number): string {
  const counts = terms.map((t) => `\`${t.word}\` ${filesWith.get(t.stem) ?? 0}`);
  return `Term rarity (files containing each term, of ${files} files containing any): ${counts.join(', ')}.`;
}

/** Term counts stated by an answer's rarity line, by stem; null when the answer states none. */
export function parseRarity(text: string, terms: readonly Term[]): { filesWith: Map<string, number>; files: number } | null {
  const m = RARITY_LINE.exec(text);
  if (!m) return null;
  const files = Number(m[1]);
  const filesWith = new Map<string, number>();
  for (const t of terms) {
    const count = new RegExp(`\`${escapeRegex(t.word)}\` (\\d+)`, 'u').exec(m[2] as string);
    if (count) filesWith.set(t.stem, Math.min(files, Number(count[1])));
  }
  return Number.isSafeInteger(files) && files > 0 ? { filesWith, files } : null;
}

/** A line as the ranking sees it. */
export interface RankedLine {
  path: string;
  line: number;
  text: string;
}

/**
 * What encloses a line: its file's base name and the nearest type declared above it among
 * `others` (lines of any file; only the same file's count).
 */
export function enclosingContext(target: RankedLine, others: readonly RankedLine[]): string {
  const base = target.path.split('/').pop() ?? target.path;
  let nearest: RankedLine | undefined;
  for (const o of others) {
    if (o.path !== target.path || o.line >= target.line) continue;
    if (definitionOf(o.text)?.kind !== 'type') continue;
    if (nearest === undefined || o.line > nearest.line) nearest = o;
  }
  const declared = nearest === undefined ? '' : (definitionOf(nearest.text)?.name ?? '');
  return `${base} ${declared}`;
}

/**
 * How well one line answers the request (higher is better), before the path prior: a
 * definition scores the terms its name carries, by its kind, plus (for behaviour) the terms of
 * what encloses it; every line scores half the weight of the other terms it mentions.
 */
export function answerScore(text: string, terms: readonly Term[], context = ''): number {
  const inLine = termsIn(text, terms);
  const def = definitionOf(text);
  if (def === null) return 0.5 * termWeight(inLine);
  const inName = termsIn(def.name, terms);
  const rest = inLine.filter((t) => !inName.includes(t));
  const around = def.kind === 'callable' && inName.length > 0 ? termsIn(context, terms).filter((t) => !inName.includes(t) && !rest.includes(t)) : [];
  return KIND_FACTOR[def.kind] * (2 * termWeight(inName) + termWeight(around)) + 0.5 * termWeight(rest);
}

/** `answerScore` with the path prior and the line's enclosing context among `others`. */
export function lineRank(target: RankedLine, terms: readonly Term[], others: readonly RankedLine[]): number {
  return answerScore(target.text, terms, enclosingContext(target, others)) * pathPrior(target.path);
}
