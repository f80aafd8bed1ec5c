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

const AI_WORD = String.raw`(?:ai|a\.i\.|llms?|language models?|chat ?bots?|chatgpt|copilot|assistants?|agents?|models?|systems?|summari[sz]ers?|crawlers?|gpt|claude|bots?)`;
/** "AI", "AI assistants", "language models": one or two addressee words. */
const AI_ADDRESSEE = String.raw`(?:(?:automated|automatic|autonomous|generative|artificial|virtual|large)\s+)?${AI_WORD}(?:\s+${AI_WORD})?`;

/**
 * Text that speaks to an AI reader. Explicit forms ("note for AI assistants", "dear AI", "if you
 * are a language model") are instructions by themselves; plain mentions ("the assistant", "all
 * models") only together with a directive about what to say.
 */
const CALLS_ON_AI = new RegExp(
  String.raw`\b(?:dear|hey|hi|hello|attention|note\s+(?:to|for)|message\s+(?:to|for)|instructions?\s+(?:to|for)(?:\s+the)?|if\s+you\s+are(?:\s+an?)?|you\s+are(?:\s+an?)?|as\s+an?)\s+${AI_ADDRESSEE}\b|\b${AI_ADDRESSEE}\s+(?:reading|processing|summari[sz]ing|visiting|crawling)\b`,
  'iu',
);
const MENTIONS_AI = new RegExp(String.raw`\b(?:the|all|any|every)\s+${AI_ADDRESSEE}\b`, 'iu');

/** Directives about what to say: "must now state", "always say", "tell the user", "report … as". */
const DIRECTS_SPEECH =
  /\b(?:must|should|shall|always|never|only|now)\s+(?:now\s+|also\s+)?(?:say|state|claim|answer|reply|respond|report|mention|output|write)\b|\b(?:tell|inform)\s+(?:the\s+)?(?:users?|readers?|humans?|people)\b|\breport\s+(?:the\s+)?[\w\s-]{1,40}?\s+as\s+[\w\d]/iu;

/** Patterns of text that gives instructions to whoever (or whatever) reads it. */
const INJECTION_PATTERNS: ReadonlyArray<{ test: (text: string) => boolean; reason: string }> = [
  { test: (t) => /\b(?:ignore|disregard|forget|override|bypass)\b[^.!?\n]{0,40}\b(?:previous|prior|above|earlier|all|any|your|the)\b[^.!?\n]{0,30}\b(?:instructions?|prompts?|rules|guidelines|directions|context)\b/iu.test(t), reason: 'tells the reader to ignore its instructions' },
  { test: (t) => /(?:^|\n)\s*(?:system|assistant|developer)\s*:|<\|im_start\|>|\[\/?INST\]/iu.test(t), reason: 'imitates a message to an AI (a role marker)' },
  { test: (t) => CALLS_ON_AI.test(t), reason: 'addresses an AI' },
  { test: (t) => MENTIONS_AI.test(t) && (DIRECTS_SPEECH.test(t) || /\b(?:say|state|claim|answer|reply|respond|tell|mention)\b/iu.test(t)), reason: 'addresses an AI with instructions' },
  { test: (t) => /\bwhen\s+(?:answering|summari[sz]ing|responding|replying|asked)\b/iu.test(t) && DIRECTS_SPEECH.test(t), reason: 'tells the reader what to answer' },
  { test: (t) => /\byou\s+(?:must|should|are\s+required\s+to)\s+(?:now\s+)?(?:say|answer|respond|reply|tell|state|claim|report|output)\b/iu.test(t), reason: 'tells the reader what to answer' },
  { test: (t) => /\b(?:respond|reply|answer)\s+(?:only\s+)?with\b[^.!?\n]{0,40}\b(?:instead|only)\b/iu.test(t), reason: 'tells the reader what to answer' },
  { test: (t) => /\b(?:system prompt|developer message|jailbreak)\b/iu.test(t), reason: 'refers to an AI system prompt' },
  { test: (t) => /\bdo\s+not\s+(?:tell|reveal|mention|cite|disclose)\b[^.!?\n]{0,30}\b(?:user|reader|anyone)\b/iu.test(t), reason: 'tells the reader to hide something' },
];

/** Why a passage looks like instructions to the reader or an AI, or null when it reads as data. */
export function injectionReason(text: string): string | null {
  for (const p of INJECTION_PATTERNS) if (p.test(text)) return p.reason;
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
/** A dotted number after a lower-case word (`client 2.1`): a version unless a unit follows. */
const DOTTED_VERSION = /\b[a-z][\w-]*\s+(\d+(?:\.\d+){1,2}|\d+(?=\.x\b))(?:\.x)?\b(?!\s*(?:%|ms\b|seconds?\b|minutes?\b|hours?\b|days?\b|bytes?\b|[kmg]i?b\b|times\b))/gu;
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
  for (const m of text.matchAll(DOTTED_VERSION)) if (!found.some((f) => f.v === m[1])) add(m.index, m[1]);
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
// Recency: when the question names no version, the newest statement answers
// ---------------------------------------------------------------------------------------------

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const ISO_DATE = /\b((?:19|20)\d\d)-(0[1-9]|1[0-2])(?:-(0[1-9]|[12]\d|3[01]))?\b/gu;
const NAMED_DATE = /\b(?:(\d{1,2})\s+)?(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(?:(\d{1,2}),?\s+)?((?:19|20)\d\d)\b/giu;

/** Dates a text states (`2024-03-01`, `March 2024`, `1 March 2024`), as yyyymmdd numbers. */
export function datesIn(text: string): number[] {
  const out: number[] = [];
  for (const m of text.matchAll(ISO_DATE)) out.push(Number(m[1]) * 10000 + Number(m[2]) * 100 + Number(m[3] ?? 0));
  for (const m of text.matchAll(NAMED_DATE)) {
    const month = MONTHS.indexOf((m[2] ?? '').slice(0, 3).toLowerCase()) + 1;
    out.push(Number(m[4]) * 10000 + month * 100 + Number(m[1] ?? m[3] ?? 0));
  }
  return out;
}

/** Numeric order of two version strings (`5` > `4.2`); missing parts count as 0. */
function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i += 1) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

export interface DatedPage {
  url: string;
  content: string;
}

/**
 * Pages another page supersedes, for a question that names no version: when two pages answer
 * it, one about an older version of the subject than another, or dated earlier than another,
 * states what was true then, not now. Returns url → reason. Pages that state neither a version
 * nor a date are never set aside: nothing says they are old.
 */
export function supersededPages(pages: readonly DatedPage[]): Map<string, string> {
  const facts = pages.map((p) => ({ url: p.url, version: pageVersion(p.content), date: Math.max(0, ...datesIn(p.content)) }));
  const out = new Map<string, string>();
  const newestVersion = facts.filter((f) => f.version !== null).sort((a, b) => compareVersions(b.version as string, a.version as string))[0];
  const newestDate = facts.filter((f) => f.date > 0).sort((a, b) => b.date - a.date)[0];
  for (const f of facts) {
    if (newestVersion && f.version !== null && compareVersions(f.version, newestVersion.version as string) < 0 && !sameRelease(f.version, newestVersion.version as string)) {
      out.set(f.url, `it is about version ${f.version}, superseded by version ${newestVersion.version as string} (${newestVersion.url})`);
    } else if (newestDate && f.date > 0 && f.date < newestDate.date && Math.floor(f.date / 10000) * 10000 !== f.date && f.version === null) {
      out.set(f.url, `it is dated ${formatDate(f.date)}, superseded by ${newestDate.url}, dated ${formatDate(newestDate.date)}`);
    }
  }
  return out;
}

function formatDate(d: number): string {
  const y = Math.floor(d / 10000);
  const m = Math.floor(d / 100) % 100;
  const day = d % 100;
  return `${y}-${String(m).padStart(2, '0')}${day > 0 ? `-${String(day).padStart(2, '0')}` : ''}`;
}

/** Words that say a statement no longer holds ("previously 100", "was raised from", "deprecated"). */
const SUPERSEDED_WORDS = /\b(?:previously|formerly|used\s+to|no\s+longer|deprecated|legacy|outdated|obsolete|(?:was|were)\s+(?:changed|raised|lowered|increased|decreased|reduced|replaced|updated))\b|\bolder\s+(?:versions?|releases?)\b/iu;
/** Words that say a statement is the current one. */
const CURRENT_WORDS = /\b(?:now|currently|as\s+of|starting\s+(?:with|in|from)|since\s+(?:version|release|v)|the\s+new\s+default|latest)\b/iu;

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

/** Questions whose answer is a number. */
const ASKS_FOR_NUMBER = /\bhow\s+(?:many|much|long|often|large|big)\b|\b(?:limit|maximum|minimum|size|port|timeout|ttl|number\s+of|count)\b/iu;

/**
 * The sentences that answer the question, best first (at most `max`, from different passages
 * when they add terms): BM25 over sentences, with a preference for sentences that state a value
 * when the question asks for one, for sentences carrying more of the question's terms, and,
 * when the question names a version, for sentences about that version over another one.
 */
export function answerSentences(evidence: readonly SourcedText[], terms: readonly Term[], objective: string, asked: readonly string[] = [], max = 2): AnswerSentence[] {
  const sentences: SourcedText[] = evidence.flatMap((p) => sentencesOf(p.text).map((text) => ({ url: p.url, text })));
  if (sentences.length === 0 || terms.length === 0) return [];
  const wantsValue = ASKS_FOR_VALUE.test(objective);
  const wantsNumber = ASKS_FOR_NUMBER.test(objective);
  const newest = Math.max(0, ...sentences.flatMap((s) => datesIn(s.text)));
  const scored = bm25(sentences, (s) => s.text, terms)
    .filter((s) => s.score > 0)
    .map((s) => {
      // A quantity is stated with a number; a name (a hash, a protocol) may be an acronym.
      const states = (wantsNumber ? /\d/u : /\d|\b[A-Z]{2,}[\w-]*\b/u).test(s.item.text);
      // A sentence that asks or reports the question ("someone asked how many…") does not answer it.
      const asks = /\?\s*$|\b(?:asked|asks|wondering|wonders)\b/iu.test(s.item.text) ? 0.4 : 1;
      // A sentence about the version asked beats one about another version of the subject.
      const versions = asked.length === 0 ? [] : versionsIn(s.item.text);
      const fit = versions.length === 0 ? 1 : versions.some((v) => asked.some((a) => sameRelease(a, v))) ? 1.5 : 0.3;
      // The current statement over a superseded one: its own words, then its date against the
      // newest date any candidate sentence states.
      const dates = datesIn(s.item.text);
      const dated = dates.length === 0 || newest === 0 ? 1 : Math.max(...dates) < newest ? 0.5 : 1.2;
      const current = (SUPERSEDED_WORDS.test(s.item.text) ? 0.5 : 1) * (CURRENT_WORDS.test(s.item.text) ? 1.25 : 1) * dated;
      const bonus = (wantsValue && states ? 1.5 : 1) * (1 + 0.25 * s.matched.length) * fit * current * asks;
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
