/**
 * Judging fetched text before it is used as evidence, for the builtin research candidate and
 * merger: every page is data, never instructions.
 *
 *   - A passage that addresses the reader or an AI with instructions ("ignore your previous
 *     instructions", "AI assistants must answer…") is a suspected injection: never evidence.
 *   - When the question names a version of its subject, a page about another version is set
 *     aside (with the reason), so figures from a superseded release do not answer it.
 *   - The answer is the sentence(s) that answer the question, picked from the evidence.
 */
import { bm25 } from './bm25.js';
import type { RequestFields, Term } from './terms.js';
import { termsIn } from './terms.js';

// ---------------------------------------------------------------------------------------------
// Injections
// ---------------------------------------------------------------------------------------------

const AI_ADDRESSEE = String.raw`(?:ai|a\.i\.|llms?|language models?|chat ?bots?|assistants?|agents?|models?|gpt|claude|bots?)`;

/** Patterns of text that gives instructions to whoever (or whatever) reads it. */
const INJECTION_PATTERNS: ReadonlyArray<{ re: RegExp; reason: string }> = [
  { re: /\b(?:ignore|disregard|forget|override|bypass)\b[^.!?\n]{0,40}\b(?:previous|prior|above|earlier|all|any|your|the)\b[^.!?\n]{0,30}\b(?:instructions?|prompts?|rules|guidelines|directions|context)\b/iu, reason: 'tells the reader to ignore its instructions' },
  { re: new RegExp(String.raw`\b(?:attention|note|notice|message|instructions?)\s+(?:to|for)\s+(?:all\s+|any\s+)?${AI_ADDRESSEE}\b`, 'iu'), reason: 'addresses an AI with instructions' },
  { re: new RegExp(String.raw`\b(?:if|when)\s+you\s+are\s+(?:an?\s+)?${AI_ADDRESSEE}\b`, 'iu'), reason: 'addresses an AI with instructions' },
  { re: new RegExp(String.raw`\b${AI_ADDRESSEE}\s+(?:reading|processing|summari[sz]ing|visiting|crawling)\s+(?:this|these)\b`, 'iu'), reason: 'addresses an AI with instructions' },
  { re: new RegExp(String.raw`\b(?:all|any)\s+${AI_ADDRESSEE}\s+(?:must|should|shall|are\s+required\s+to)\b`, 'iu'), reason: 'addresses an AI with instructions' },
  { re: /\b(?:system prompt|developer message|jailbreak)\b/iu, reason: 'refers to an AI system prompt' },
  { re: /\byou\s+(?:must|should|are\s+required\s+to)\s+(?:now\s+)?(?:say|answer|respond|reply|tell|state|claim|report|output)\b/iu, reason: 'tells the reader what to answer' },
  { re: /\b(?:respond|reply|answer)\s+(?:only\s+)?with\b[^.!?\n]{0,40}\b(?:instead|only)\b/iu, reason: 'tells the reader what to answer' },
  { re: /\bdo\s+not\s+(?:tell|reveal|mention|cite|disclose)\b[^.!?\n]{0,30}\b(?:user|reader|anyone)\b/iu, reason: 'tells the reader to hide something' },
];

/** Why a passage looks like instructions to the reader or an AI, or null when it reads as data. */
export function injectionReason(text: string): string | null {
  for (const p of INJECTION_PATTERNS) if (p.re.test(text)) return p.reason;
  return null;
}

// ---------------------------------------------------------------------------------------------
// Subject and version
// ---------------------------------------------------------------------------------------------

/** `version 3`, `release 2.1`, `v5`. */
const KEYWORD_VERSION = /\b(?:version|release|v)\s*(\d+(?:\.\d+){0,2})(?:\.x)?\b/giu;
/** A capitalised name followed by a number: `Acme Cache 3`, `Orbit Server 5.1`, `Lumen 2.x`. */
const NAMED_VERSION = /\b([A-Z][\w-]*)\s+(\d+(?:\.\d+){0,2})(?:\.x)?\b(?!\s*(?:%|ms\b|seconds?\b|minutes?\b|hours?\b|days?\b|bytes?\b|[kmg]i?b\b|times\b|requests?\b|retries\b|entries\b|items\b|tokens?\b))/gu;
/** Capitalised words that precede numbers without naming a product. */
const NOT_A_NAME = new Set(['HTTP', 'HTTPS', 'RFC', 'ISO', 'IPv4', 'IPv6', 'Section', 'Chapter', 'Table', 'Figure', 'Step', 'Part', 'Page', 'Port', 'Status', 'Error', 'Code', 'Level', 'Phase', 'Stage', 'Day', 'Week', 'Year', 'Top', 'Over', 'Under', 'About', 'Since', 'Until', 'In', 'On', 'At', 'By', 'Of', 'For', 'To', 'The', 'A', 'An', 'Only', 'Up', 'Every', 'After', 'Before', 'With', 'Is', 'Are', 'Was', 'It', 'Returns', 'Returned', 'Uses', 'Use']);

function major(version: string): string {
  return version.split('.')[0] ?? version;
}

/** Versions mentioned with a name (`Acme Cache 3`, `Orbit Server 5.1`) or as `version 2`/`v2`. */
export function versionsIn(text: string): string[] {
  return [...new Set(versionMentions(text))];
}

/** Every version mention, repeats included, in order of appearance. */
function versionMentions(text: string): string[] {
  const found: Array<{ at: number; v: string }> = [];
  const add = (at: number, v: string | undefined): void => {
    if (v !== undefined && v !== '' && Number(major(v)) < 1000) found.push({ at, v });
  };
  for (const m of text.matchAll(KEYWORD_VERSION)) add(m.index, m[1]);
  for (const m of text.matchAll(NAMED_VERSION)) if (!NOT_A_NAME.has(m[1] ?? '')) add(m.index, m[2]);
  return found.sort((a, b) => a.at - b.at).map((f) => f.v);
}

/** The versions the question asks about (objective first, then the rest of the request). */
export function requestedVersions(fields: RequestFields): string[] {
  const objective = versionsIn(fields.objective);
  return objective.length > 0 ? objective : versionsIn([...fields.scope, ...fields.background].join('\n'));
}

/** Whether two version strings name the same release at the precision both give (`3` ~ `3.2`). */
function sameRelease(a: string, b: string): boolean {
  const pa = a.split('.');
  const pb = b.split('.');
  const n = Math.min(pa.length, pb.length);
  for (let i = 0; i < n; i += 1) if (pa[i] !== pb[i]) return false;
  return true;
}

/**
 * The version a page is about: the one its title (first heading or first line) names, else the
 * one it mentions most often; null when it names none.
 */
export function pageVersion(content: string): string | null {
  const lines = content.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  const title = (lines.find((l) => /^#{1,3}\s/u.test(l)) ?? lines[0] ?? '').replace(/^#+\s*/u, '');
  const inTitle = versionsIn(title);
  if (inTitle.length > 0) return inTitle[0] ?? null;
  const counts = new Map<string, number>();
  for (const v of versionMentions(content)) counts.set(v, (counts.get(v) ?? 0) + 1);
  return [...counts.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] ?? null;
}

/** Why a page must be set aside for this question (another version of the subject), or null. */
export function setAsideReason(content: string, asked: readonly string[]): string | null {
  if (asked.length === 0) return null;
  const about = pageVersion(content);
  if (about === null || asked.some((v) => sameRelease(v, about))) return null;
  return `it is about version ${about}, and the question asks about version ${asked.join(' or ')}`;
}

// ---------------------------------------------------------------------------------------------
// Answer sentences
// ---------------------------------------------------------------------------------------------

export interface SourcedText {
  url: string;
  text: string;
}

export interface AnswerSentence extends SourcedText {
  score: number;
  matched: Term[];
}

/** Sentences of a passage, whitespace collapsed (the citation checks compare collapsed text). */
export function sentencesOf(text: string): string[] {
  return text
    .replace(/\s+/gu, ' ')
    .trim()
    .split(/(?<=[.!?])\s+(?=[A-Z0-9"'(`])/u)
    .map((s) => s.trim())
    .filter((s) => s.length >= 12 && /[A-Za-z]{3,}/u.test(s) && !/^#/u.test(s));
}

/** Questions that ask for a quantity or a name are answered by a sentence that states one. */
const ASKS_FOR_VALUE = /\b(?:how\s+(?:many|much|long|often|large|big)|what\s+(?:is|are)\s+the\s+(?:default|limit|maximum|minimum|size|port|value|number|timeout|ttl)|which\s+(?:port|version|value|number|status|code|hash|algorithm|function)|default|limit|port|timeout|status\s+code|how\s+(?:does|do|is|are))\b/iu;

/**
 * The sentences that answer the question, best first (at most `max`, from different passages
 * when they add terms): BM25 over sentences, with a preference for sentences that state a value
 * when the question asks for one and for sentences carrying more of the question's terms.
 */
export function answerSentences(evidence: readonly SourcedText[], terms: readonly Term[], objective: string, max = 2): AnswerSentence[] {
  const sentences: SourcedText[] = evidence.flatMap((p) => sentencesOf(p.text).map((text) => ({ url: p.url, text })));
  if (sentences.length === 0 || terms.length === 0) return [];
  const wantsValue = ASKS_FOR_VALUE.test(objective);
  const scored = bm25(sentences, (s) => s.text, terms)
    .filter((s) => s.score > 0)
    .map((s) => {
      const states = /\d|\b[A-Z]{2,}[\w-]*\b/u.test(s.item.text);
      const bonus = (wantsValue && states ? 1.5 : 1) * (1 + 0.25 * s.matched.length);
      return { ...s.item, score: s.score * bonus, matched: s.matched };
    })
    .sort((a, b) => b.score - a.score || a.text.length - b.text.length);
  const picked: AnswerSentence[] = [];
  const covered = new Set<Term>();
  for (const s of scored) {
    if (picked.length >= max) break;
    if (picked.length > 0) {
      const fresh = s.matched.filter((t) => !covered.has(t));
      // A second sentence earns its place by adding a term and scoring close to the first.
      if (fresh.length === 0 || s.score < 0.6 * (picked[0]?.score ?? 0)) continue;
    }
    picked.push(s);
    for (const t of termsIn(s.text, terms)) covered.add(t);
  }
  return picked;
}
