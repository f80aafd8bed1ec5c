/**
 * Lines that merely repeat the request. A repository often holds the very question being asked:
 * a Makefile target or a benchmark that submits it, a test that quotes it. Such a line carries
 * every term of the request and would outrank whatever answers it, yet it says nothing about
 * where the answer is: it is the question, not evidence.
 *
 * The rule, over words (runs of letters and digits, lower-cased): a line echoes the request when
 * it repeats, word for word and in order, a run of at least half of one request field's words
 * (objective, background, deliverable, scope, constraint) and at least `MIN_ECHO_WORDS` words.
 * A field shorter than that is never echoed, so a line naming a short field (a two-word scope
 * such as "retry policy") stays evidence. Ordinary prose that shares a phrase with the question
 * ("the task state machine") repeats far less than half of a field and stays too.
 */
import type { RequestFields } from './terms.js';

/** Words in the shortest run that counts as a quotation rather than a shared phrase. */
export const MIN_ECHO_WORDS = 5;
/** Lines are compared up to this many words (a quoted field fits well within it). */
const MAX_LINE_WORDS = 200;

export function words(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).slice(0, MAX_LINE_WORDS);
}

/** The length of the longest run of consecutive words `a` and `b` share. */
export function longestCommonRun(a: readonly string[], b: readonly string[]): number {
  let best = 0;
  let prev = new Array<number>(b.length + 1).fill(0);
  for (let i = 1; i <= a.length; i += 1) {
    const row = new Array<number>(b.length + 1).fill(0);
    for (let j = 1; j <= b.length; j += 1) {
      if (a[i - 1] === b[j - 1]) {
        const run = (prev[j - 1] as number) + 1;
        row[j] = run;
        if (run > best) best = run;
      }
    }
    prev = row;
  }
  return best;
}

function fieldTexts(fields: RequestFields): string[] {
  return [fields.objective, ...fields.background, fields.deliverable, ...fields.scope, ...fields.constraints];
}

const cache = new WeakMap<RequestFields, (text: string) => boolean>();

/** The predicate "this line echoes the request" for one request (memoised per fields object). */
export function requestEcho(fields: RequestFields): (text: string) => boolean {
  const known = cache.get(fields);
  if (known !== undefined) return known;
  const quoted = fieldTexts(fields)
    .map(words)
    .filter((w) => w.length >= MIN_ECHO_WORDS)
    .map((w) => ({ words: w, need: Math.max(MIN_ECHO_WORDS, Math.ceil(w.length / 2)), vocabulary: new Set(w) }));
  const echo = (text: string): boolean => {
    if (quoted.length === 0) return false;
    const line = words(text);
    return quoted.some((f) => {
      // Cheap bound first: the line cannot repeat more of the field than the words it shares.
      if (line.filter((w) => f.vocabulary.has(w)).length < f.need) return false;
      return longestCommonRun(line, f.words) >= f.need;
    });
  };
  cache.set(fields, echo);
  return echo;
}
