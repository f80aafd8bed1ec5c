/**
 * Search terms of a request, for the builtin engine.
 *
 * The request text is the canonical JSON of the normalised tool arguments. Terms are the
 * identifiers it names (camelCase, snake_case, dotted names, quoted words, acronyms) and its
 * content words (≥ 4 letters, minus English stopwords and words generic to any code question),
 * weighted by where they occur (objective > scope > background > deliverable), stemmed so
 * `parse`, `parsed` and `parsing` are one term, and the top few kept.
 */

export interface Term {
  /** The word as it first appeared (lowercased), for people. */
  word: string;
  /** Lowercase stem matched as a substring (`parsed` → `pars`); identifiers are kept whole. */
  stem: string;
  weight: number;
  identifier: boolean;
}

export interface RequestFields {
  objective: string;
  background: string[];
  deliverable: string;
  scope: string[];
  constraints: string[];
  /** Research: the purposes of the declared sources. */
  sourcePurposes: string[];
}

export const MAX_TERMS = 6;

const STOPWORDS = new Set(
  `a about above after again against all also an and any are as at be because been before being below between both but by can
  could did do does doing down during each either else ever every few for from further had has have having he her here hers
  him his how however i if in into is it its itself just least less many may me might more most much must my neither no nor
  not now of off often on once only onto or other others our ours out over own per perhaps please quite rather same shall she
  should since so some such than that the their theirs them then there these they this those though through thus to too
  under until up upon us very via was we well were what whatever when whenever where whereas wherever whether which while who
  whom whose why will with within without would yet you your yours`.split(/\s+/u),
);

/** Words that appear in almost any code question and say nothing about where to look. */
const GENERIC = new Set(
  `find finds found finding locate locating look looking search searching show shows showing tell explain explains describe
  describes list lists give identify point where which what implemented implement implements implementation implementations
  function functions method methods code codes file files repository repositories repo project projects report reports
  answer answers question questions line lines source sources module modules package packages thing things part parts place
  places work works working used uses using make makes made need needs want wants check checks done does happen happens
  handled handle handles defined define defines definition located called call calls exist exists existing name names named
  relevant related specific given into onto each including include includes return returns path paths summary summarize
  deliverable objective background scope constraint constraints short brief concise detail details clear clearly purpose
  document documentation page pages read reads reading note notes reference references overview information example examples
  docs doc`.split(/\s+/u),
);

const FIELD_WEIGHTS = { objective: 4, scope: 3, background: 2, deliverable: 1, constraints: 0.5, sourcePurposes: 1 } as const;

/** Parse the canonical request text (JSON of the normalised arguments); tolerant of missing fields. */
export function requestFields(requestText: string): RequestFields {
  let value: unknown;
  try {
    value = JSON.parse(requestText) as unknown;
  } catch {
    value = { objective: requestText };
  }
  const rec = typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  const str = (v: unknown): string => (typeof v === 'string' ? v : '');
  const strs = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
  const sources = Array.isArray(rec['sources']) ? rec['sources'] : [];
  return {
    objective: str(rec['objective']),
    background: strs(rec['background']),
    deliverable: str(rec['deliverable']),
    scope: strs(rec['scope']),
    constraints: strs(rec['constraints']),
    sourcePurposes: sources.map((s) => (typeof s === 'object' && s !== null ? str((s as Record<string, unknown>)['purpose']) : '')).filter(Boolean),
  };
}

/** Crude English stemmer: enough to merge inflections of one word, never shorter than 4 letters. */
export function stem(word: string): string {
  let w = word.toLowerCase();
  const cut = (suffix: string, replacement = ''): boolean => {
    if (!w.endsWith(suffix)) return false;
    const base = w.slice(0, w.length - suffix.length) + replacement;
    if (base.length < 4) return false;
    w = base;
    return true;
  };
  // Plural / third person: -ies → '' (so `entr` matches entry and entries alike), -sses → -ss, -xes/-ches → -x/-ch, -s → '' (not -ss/-us/-is).
  const plural = cut('ies') || cut('sses', 'ss') || (/(?:x|z|ch|sh)es$/u.test(w) && cut('es'));
  if (!plural && !/(?:ss|us|is)$/u.test(w)) cut('s');
  if (!cut('ing')) cut('ed');
  if (/([b-df-hj-np-tv-z])\1$/u.test(w) && !/(?:ll|ss|zz)$/u.test(w)) cut(w.slice(-1));
  cut('e');
  return w;
}

/** Weight multipliers: identifiers in the text, and names the caller marked (quoted, dotted, file names). */
const IDENTIFIER_WEIGHT = 2.5;
const NAMED_WEIGHT = 3;
const FILE_EXTENSION = /^(?:js|mjs|cjs|jsx|ts|mts|cts|tsx|py|go|rs|java|kt|rb|php|cs|swift|c|h|cc|cpp|hpp|md|json|ya?ml|toml|sh)$/u;

/**
 * A capitalised word inside a sentence (`the Scheduler decides`) names something (a class, a
 * type, a product); at the start of a sentence it is just capitalised.
 */
function isCapitalisedName(token: string, before: string): boolean {
  if (!/^[A-Z][a-z]{3,}$/u.test(token)) return false;
  return before.trim() !== '' && !/[.!?:]\s*$/u.test(before);
}

function isIdentifierToken(token: string): boolean {
  if (/[a-z][A-Z]/u.test(token)) return true; // camelCase, IPv4
  if (/[A-Za-z]_[A-Za-z0-9]|^_+[A-Za-z]/u.test(token)) return true; // snake_case
  if (/[A-Za-z]\d|\d[A-Za-z]/u.test(token)) return true; // utf8, base64
  if (/^[A-Z]{3,}$/u.test(token)) return true; // acronyms: CIDR, URL
  return false;
}

interface Acc {
  word: string;
  stem: string;
  weight: number;
  identifier: boolean;
  first: number;
}

function addText(text: string, weight: number, acc: Map<string, Acc>, order: { n: number }): void {
  const add = (word: string, stemmed: string, w: number, identifier: boolean): void => {
    if (stemmed.length < 3) return;
    const existing = acc.get(stemmed);
    if (existing) {
      existing.weight += w;
      existing.identifier ||= identifier;
    } else {
      acc.set(stemmed, { word, stem: stemmed, weight: w, identifier, first: order.n++ });
    }
  };
  // The names a question uses (identifiers, file and module names) say where to look far more
  // than its common words, which prose anywhere repeats: they weigh several times more.
  // Quoted words and dotted names are identifiers the caller named on purpose.
  for (const m of text.matchAll(/[`"']([A-Za-z_$][\w$.-]{2,60})[`"']/gu)) {
    const name = (m[1] as string).replace(/[.-]+$/u, '');
    if (!/[.-]/u.test(name)) add(name.toLowerCase(), name.toLowerCase(), weight * NAMED_WEIGHT, true);
  }
  for (const m of text.matchAll(/[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+/gu)) {
    const parts = m[0].split('.');
    const last = (parts.pop() ?? '').toLowerCase();
    // A file name (`store.ts`, `retry_policy.py`): its base name names the module.
    if (FILE_EXTENSION.test(last)) {
      const base = (parts.pop() ?? '').toLowerCase();
      if (base.length >= 3 && !STOPWORDS.has(base)) add(base, base, weight * NAMED_WEIGHT, true);
      continue;
    }
    // Dotted names (`ipaddr.IPv4.parseCIDR`): the last segment is what a definition names.
    if (last.length >= 3 && !STOPWORDS.has(last) && !/^(?:com|org|net|io)$/u.test(last)) add(last, last, weight * NAMED_WEIGHT, true);
  }
  for (const m of text.matchAll(/[A-Za-z_$][\w$]*/gu)) {
    const token = m[0];
    const lower = token.toLowerCase();
    if (STOPWORDS.has(lower) || GENERIC.has(lower)) continue;
    if (isIdentifierToken(token) || isCapitalisedName(token, text.slice(0, m.index))) {
      add(lower, lower, weight * IDENTIFIER_WEIGHT, true);
      continue;
    }
    if (!/^[A-Za-z]{4,}$/u.test(token)) continue;
    const s = stem(lower);
    if (GENERIC.has(s) || STOPWORDS.has(s)) continue;
    add(lower, s, weight, false);
  }
}

/** The request's search terms, best first. Deterministic: ties break by first appearance. */
export function extractTerms(fields: RequestFields, max = MAX_TERMS): Term[] {
  const acc = new Map<string, Acc>();
  const order = { n: 0 };
  addText(fields.objective, FIELD_WEIGHTS.objective, acc, order);
  for (const s of fields.scope) addText(s, FIELD_WEIGHTS.scope, acc, order);
  for (const s of fields.background) addText(s, FIELD_WEIGHTS.background, acc, order);
  addText(fields.deliverable, FIELD_WEIGHTS.deliverable, acc, order);
  for (const s of fields.constraints) addText(s, FIELD_WEIGHTS.constraints, acc, order);
  for (const s of fields.sourcePurposes) addText(s, FIELD_WEIGHTS.sourcePurposes, acc, order);
  const kept = [...acc.values()].sort((a, b) => b.weight - a.weight || Number(b.identifier) - Number(a.identifier) || a.first - b.first).slice(0, max);
  return kept.map((t) => ({ word: t.word, stem: t.stem, weight: Math.round(t.weight * 100) / 100, identifier: t.identifier }));
}

export function escapeRegex(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/gu, '\\$&');
}

/** The terms whose stem occurs in `text` (case-insensitive). */
export function termsIn(text: string, terms: readonly Term[]): Term[] {
  const lower = text.toLowerCase();
  return terms.filter((t) => lower.includes(t.stem));
}

export function termWeight(terms: readonly Term[]): number {
  return terms.reduce((sum, t) => sum + t.weight, 0);
}

export function termWords(terms: readonly Term[]): string {
  return terms.map((t) => t.word).join(', ');
}
