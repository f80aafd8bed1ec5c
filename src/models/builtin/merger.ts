/**
 * The final answer, composed from the findings the evaluation's plan marks as verified:
 * deduplicated by `path:line` (or URL passage), ordered by how many answers carry the same
 * line, then by the plan's order; conflicts become plain statements; anything the plan says to
 * avoid is left out. The text speaks to the person who asked and says nothing about how it was
 * produced.
 */
import { OUTPUT_CAPS } from '../../contracts/constants.js';
import { capBytes, codeSpan } from './answer.js';
import { codeSpans, parseChecks, parseCitedLines, parseCitedUrls } from './citations.js';
import { collapseWhitespace } from '../../contracts/citations.js';
import { answerSentences, injectionReason, requestedVersions } from './page-judgement.js';
import { definedName, definitionOf } from './definitions.js';
import type { RankedLine } from './lead.js';
import { lineRank, parseRarity, withRarity } from './lead.js';
import { compareStrings } from './strategy.js';
import type { Term } from './terms.js';
import { escapeRegex, extractTerms, requestFields, termsIn } from './terms.js';
import { asArray, asRecord, asString } from './transcript.js';
import { requestEcho } from './request-echo.js';

const MAX_LINES = 30;
const MAX_PASSAGES = 10;
const MAX_QUOTE_CHARS = 400;
const PATH_LINE = /^([^\s`:][^\s`]*?):(\d+)(?:-\d+)?$/u;
const URL = /https?:\/\/[^\s<>`"')\]]+/u;

interface Line {
  citation: string;
  path: string;
  line: number;
  quote: string;
  /** Answers carrying this exact line. */
  support: number;
  order: number;
}

interface PassageGroup {
  url: string;
  passages: string[][];
  support: number;
  order: number;
}

function firstCitation(text: string): string | null {
  for (const span of codeSpans(text)) {
    const m = PATH_LINE.exec(span.trim());
    if (m) return `${m[1] as string}:${Number(m[2])}`;
  }
  return null;
}

/** The bullet lines of a `## <heading>` section of an answer (case-insensitive heading). */
function sectionBullets(text: string, heading: string): string[] {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => new RegExp(`^#{1,6}\\s*${heading}\\s*$`, 'iu').test(l.trim()));
  if (start < 0) return [];
  const out: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (/^#{1,6}\s/u.test(line)) break;
    if (/^[-*]\s/u.test(line) && firstUrl(line) !== null) out.push(line.trim());
  }
  return out.slice(0, MAX_PASSAGES);
}

function firstUrl(text: string): string | null {
  const m = URL.exec(text);
  return m ? m[0].replace(/[.,;:]+$/u, '') : null;
}

function firstPath(text: string): string | null {
  for (const span of codeSpans(text)) {
    const s = span.trim();
    if (!s.includes(' ') && /[/.]/u.test(s) && !/^https?:/iu.test(s)) return s.replace(/:\d+(?:-\d+)?$/u, '');
  }
  return firstUrl(text);
}

function reason(quote: string, terms: readonly Term[]): string {
  const parts: string[] = [];
  const name = definedName(quote);
  if (name !== null) parts.push(`defines ${codeSpan(name)}`);
  const matched = termsIn(quote, terms);
  if (matched.length > 0) parts.push(`matches ${matched.map((t) => t.word).join(', ')}`);
  return parts.length > 0 ? ` — ${parts.join('; ')}` : '';
}

/** A web passage's identity: its URL and its whitespace-collapsed quote. */
function passageKey(url: string, quotes: readonly string[]): string {
  return `${url}\n${collapseWhitespace(quotes.join(' '))}`;
}

export function merge(mergeInput: unknown): string {
  const input = asRecord(mergeInput);
  const fields = requestFields(asString(asRecord(asRecord(input['canonical_input'])['request'])['text']));
  const terms = extractTerms(fields);
  const evaluation = asRecord(input['evaluation']);
  const plan = asRecord(evaluation['synthesis_plan']);
  const include = asArray(plan['must_include']).map((c) => asString(asRecord(c)['contribution']));
  const avoid = asArray(plan['must_avoid']).map(asString);

  const includeOrder = new Map<string, number>();
  include.forEach((text, i) => {
    const key = firstCitation(text) ?? firstUrl(text);
    if (key !== null && !includeOrder.has(key)) includeOrder.set(key, i);
  });
  const avoided = new Set(avoid.flatMap((text) => [firstCitation(text), firstUrl(text)].filter((k): k is string => k !== null)));
  // A plan written as prose (no citations) cannot select lines: then every quoted, not avoided line is used.
  const strict = includeOrder.size > 0 || include.length === 0;
  const allowed = (key: string): boolean => !avoided.has(key) && (!strict || includeOrder.has(key));

  // Inclusion is decided per quote: a line or passage goes in only when the mechanical check of
  // that very quote (not merely of its file or URL) confirmed it.
  const checks = asRecord(input['citation_checks']);
  const lines = new Map<string, Line>();
  const groups = new Map<string, PassageGroup>();
  let seen = 0;
  const unconfirmed = new Set<string>();
  // A line that only repeats the request is the question, not evidence, whoever cited it (request-echo.ts).
  const echoes = requestEcho(fields);
  for (const c of asArray(input['candidates'])) {
    const response = asString(asRecord(c)['response']);
    const { paths: pathChecks, urls: urlChecks } = parseChecks(checks[asString(asRecord(c)['candidate_id'])]);
    const confirmedLines = new Set(pathChecks.filter((k) => k.status === 'verified').map((k) => `${k.path}:${k.line}`));
    const confirmedPassages = new Set(urlChecks.filter((k) => k.status === 'verified' && k.quoted !== undefined).map((k) => passageKey(k.url, [k.quoted as string])));
    const counted = new Set<string>();
    for (const cited of parseCitedLines(response)) {
      if (cited.quote === null || cited.quote === '' || cited.quote.length > MAX_QUOTE_CHARS || !allowed(cited.citation) || !confirmedLines.has(cited.citation) || echoes(cited.quote)) continue;
      const entry = lines.get(cited.citation) ?? { citation: cited.citation, path: cited.path, line: cited.line, quote: cited.quote, support: 0, order: seen++ };
      if (!counted.has(cited.citation)) entry.support += 1;
      counted.add(cited.citation);
      lines.set(cited.citation, entry);
    }
    for (const cited of parseCitedUrls(response)) {
      if (cited.quotes.length === 0 || avoided.has(cited.url)) continue;
      const key = passageKey(cited.url, cited.quotes);
      if (!confirmedPassages.has(key)) {
        unconfirmed.add(key);
        continue;
      }
      const group = groups.get(cited.url) ?? { url: cited.url, passages: [], support: 0, order: seen++ };
      if (!counted.has(cited.url)) group.support += 1;
      counted.add(cited.url);
      if (!group.passages.some((p) => p.join('\n') === cited.quotes.join('\n'))) group.passages.push(cited.quotes);
      groups.set(cited.url, group);
    }
  }
  // Pages are data: a quoted passage that instructs the reader is never used, whoever quoted it;
  // and a page an answer set aside (another version of the subject) does not answer.
  const carried = { setAside: new Set<string>(), injections: new Set<string>() };
  for (const c of asArray(input['candidates'])) {
    const response = asString(asRecord(c)['response']);
    for (const line of sectionBullets(response, 'set aside')) carried.setAside.add(line);
    for (const line of sectionBullets(response, 'suspected injections')) carried.injections.add(line);
  }
  const asideUrls = new Set([...carried.setAside].map((l) => firstUrl(l)).filter((u): u is string => u !== null));
  let injected = 0;
  for (const [url, group] of groups) {
    const kept = group.passages.filter((p) => injectionReason(p.join(' ')) === null);
    injected += group.passages.length - kept.length;
    if (kept.length === 0 || asideUrls.has(url)) groups.delete(url);
    else group.passages = kept;
  }
  const rank = (key: string, fallback: number): number => includeOrder.get(key) ?? include.length + fallback;
  const kept = [...lines.values()].sort((a, b) => b.support - a.support || rank(a.citation, a.order) - rank(b.citation, b.order) || compareStrings(a.citation, b.citation)).slice(0, MAX_LINES);
  const pages = [...groups.values()].sort((a, b) => b.support - a.support || rank(a.url, a.order) - rank(b.url, b.order) || compareStrings(a.url, b.url));

  // The location to lead with is the confirmed line that best answers the request (lead.ts): a
  // confirmed definition of a name the question uses (`class RetryPolicy` for "the RetryPolicy
  // class") first; then behaviour whose name carries the rarest terms over a type that names
  // the concept, over lines that merely mention the words. Terms weigh by rarity as a candidate
  // measured it over the repository; lines more answers carry, and files with more good lines,
  // count a little more. The evaluator's conflicts (which file has most verified lines) only
  // break ties: a count of lines says nothing about which one does what was asked.
  const conflicts = asArray(evaluation['conflicts']).map(asRecord);
  const named = new Set(terms.filter((t) => t.identifier).map((t) => t.word));
  const definesNamed = (quote: string): boolean => {
    const name = definedName(quote);
    return name !== null && named.has(name.toLowerCase());
  };
  const rarity = asArray(input['candidates']).map((c) => parseRarity(asString(asRecord(c)['response']), terms)).find((r) => r !== null) ?? null;
  const weighted = rarity === null ? terms : withRarity(terms, rarity.filesWith, rarity.files);
  const asLines = kept.map((l) => ({ path: l.path, line: l.line, text: l.quote }));
  const lineValue = new Map(kept.map((l, i) => [l.citation, lineRank(asLines[i] as RankedLine, weighted, asLines) * (1 + 0.2 * (l.support - 1))]));
  const fileSupport = new Map<string, { support: number; lines: number; order: number; terms: Set<Term>; named: boolean; values: number[] }>();
  for (const l of kept) {
    const f = fileSupport.get(l.path) ?? { support: 0, lines: 0, order: l.order, terms: new Set<Term>(), named: false, values: [] };
    f.support = Math.max(f.support, l.support);
    f.named ||= definesNamed(l.quote);
    f.lines += 1;
    f.values.push(lineValue.get(l.citation) ?? 0);
    for (const t of termsIn(l.quote, terms)) f.terms.add(t);
    fileSupport.set(l.path, f);
  }
  const fileValue = (f: { values: number[] }): number => {
    const [top = 0, ...others] = [...f.values].sort((a, b) => b - a);
    return top + 0.1 * others.slice(0, 2).reduce((sum, v) => sum + v, 0);
  };
  const keyLine = (path: string): Line =>
    kept
      .filter((l) => l.path === path)
      .sort((a, b) => Number(definesNamed(b.quote)) - Number(definesNamed(a.quote)) || (lineValue.get(b.citation) ?? 0) - (lineValue.get(a.citation) ?? 0) || b.support - a.support || a.order - b.order)[0] as Line;
  // A file whose key line works on the asked concept through a type another confirmed line
  // defines (`transitionTask(…, from: TaskState, …)` beside `export type TaskState = …`, the name
  // carrying the request's terms) uses that concept; the file that defines the type is where it
  // lives, so that file leads. One step only, and never over a line defining a name the request
  // itself uses.
  const conceptHome = (path: string | undefined): string | undefined => {
    if (path === undefined || definesNamed(keyLine(path).quote)) return path;
    const quote = keyLine(path).quote;
    const home = kept.find((l) => {
      if (l.path === path) return false;
      const def = definitionOf(l.quote);
      return def !== null && def.kind === 'type' && termsIn(def.name, terms).length > 0 && new RegExp(`(?<![\\w$])${escapeRegex(def.name)}(?![\\w$])`, 'u').test(quote);
    });
    return home?.path ?? path;
  };
  const preferredByResolution = conflicts.map((c) => firstPath(asString(c['resolution']))).find((p) => p !== null && (fileSupport.has(p) || groups.has(p)));
  const byAnswer = [...fileSupport.entries()].sort(
    (a, b) => Number(b[1].named) - Number(a[1].named) || fileValue(b[1]) - fileValue(a[1]) || Number(b[0] === preferredByResolution) - Number(a[0] === preferredByResolution) || b[1].support - a[1].support || a[1].order - b[1].order,
  )[0]?.[0];
  const lead = conceptHome(byAnswer) ?? preferredByResolution ?? pages[0]?.url ?? null;

  const out: string[] = ['## Answer', ''];
  const research = asString(asRecord(input['canonical_input'])['workflow']) === 'research';
  const answers = research ? answerSentences(pages.flatMap((g) => g.passages.map((p) => ({ url: g.url, text: p.join(' ') }))), terms, fields.objective, requestedVersions(fields)) : [];
  if (research) {
    // The answer first: the sentences of the confirmed passages that answer the question.
    if (answers.length === 0) out.push('No confirmed passage of the declared sources answers the question.');
    for (const a of answers) out.push(`According to ${a.url}:`, `> ${a.text}`, '');
    if (out[out.length - 1] === '') out.pop();
    if (fields.objective !== '') out.push('', `**Request:** ${fields.objective}`);
  }
  // Investigate: the location first (what a reader sees in the first lines), then the request.
  const request = !research && fields.objective !== '' ? ['', `**Request:** ${fields.objective}`] : [];
  if (research) {
    // Answered above.
  } else if (lead === null) {
    out.push('No line of the repository or of the declared sources could be confirmed for this request, so no location can be named with confidence.', ...request);
  } else if (fileSupport.has(lead)) {
    const inLead = kept.filter((l) => l.path === lead);
    const key = keyLine(lead);
    const covered = [...(fileSupport.get(lead)?.terms ?? [])];
    const name = definedName(key.quote);
    out.push(
      `The most likely location is ${codeSpan(lead)}, line ${key.line}${name !== null ? `, which defines ${codeSpan(name)}` : ''}:`,
      '',
      `- ${codeSpan(key.citation)}`,
      `  > ${codeSpan(key.quote)}`,
      '',
      `${inLead.length} confirmed ${inLead.length === 1 ? 'line' : 'lines'} there` + (covered.length > 0 ? ` ${inLead.length === 1 ? 'matches' : 'match'} the request (${covered.map((t) => t.word).join(', ')}).` : '.'),
      ...request,
    );
  } else {
    const shown = groups.get(lead)?.passages.length ?? 0;
    out.push(`The most relevant source is ${lead}; its ${shown === 1 ? 'passage' : `${shown} passages`} quoted below ${shown === 1 ? 'was' : 'were'} found on the page as fetched.`, ...request);
  }

  const evidence: string[] = [];
  if (kept.length > 0) {
    // In research the pages answer; repository lines that share the words come after them.
    evidence.push('', research ? '## Related repository lines' : '## Evidence', '');
    for (const l of kept) evidence.push(`- ${codeSpan(l.citation)}${reason(l.quote, terms)}`, `  > ${codeSpan(l.quote)}`);
  }
  const web: string[] = [];
  const shownPages = pages.slice(0, MAX_PASSAGES);
  if (shownPages.length > 0) {
    web.push('', '## Web sources', '');
    for (const g of shownPages) {
      for (const passage of g.passages.slice(0, 3)) {
        const matched = termsIn(passage.join(' '), terms);
        web.push(`- ${g.url}${matched.length > 0 ? ` — matches ${matched.map((t) => t.word).join(', ')}` : ''}`, ...passage.map((q) => `  > ${q}`));
      }
    }
  }
  out.push(...(research ? [...web, ...evidence] : [...evidence, ...web]));

  const notes: string[] = [];
  for (const c of conflicts) {
    const claimed = [...new Set(asArray(c['positions']).map((p) => firstPath(asString(asRecord(p)['position']))).filter((p): p is string => p !== null && p !== lead))];
    if (lead !== null && claimed.length > 0) {
      notes.push(`${claimed.map((p) => codeSpan(p)).join(', ')} ${claimed.length === 1 ? 'also relates' : 'also relate'} to the request, but the confirmed evidence points to ${codeSpan(lead)}.`);
    }
  }
  if (avoided.size > 0) notes.push(`${avoided.size} cited ${avoided.size === 1 ? 'location' : 'locations'} could not be confirmed against the repository or the fetched pages and ${avoided.size === 1 ? 'is' : 'are'} left out.`);
  if (injected > 0) notes.push(`${injected} quoted ${injected === 1 ? 'passage gives' : 'passages give'} instructions to the reader and ${injected === 1 ? 'was' : 'were'} not used.`);
  // Each page with a quote its check did not confirm is named: unconfirmed, left out, not quoted.
  const unconfirmedByUrl = new Map<string, number>();
  for (const key of unconfirmed) {
    const url = key.slice(0, key.indexOf('\n'));
    unconfirmedByUrl.set(url, (unconfirmedByUrl.get(url) ?? 0) + 1);
  }
  for (const [url, n] of unconfirmedByUrl) notes.push(`Unconfirmed: ${n} quoted ${n === 1 ? 'passage' : 'passages'} attributed to ${url} ${n === 1 ? 'was' : 'were'} not found on the page as fetched and ${n === 1 ? 'is' : 'are'} left out.`);
  const covered = new Set([...kept.flatMap((l) => termsIn(l.quote, terms)), ...pages.flatMap((g) => termsIn(g.passages.flat().join(' '), terms))]);
  const missing = terms.filter((t) => !covered.has(t));
  if (missing.length > 0) notes.push(`No confirmed line mentions ${missing.map((t) => codeSpan(t.word)).join(', ')}.`);
  if (notes.length > 0) out.push('', '## Notes', '', ...notes.map((n) => `- ${n}`));
  if (carried.setAside.size > 0) out.push('', '## Set aside', '', ...carried.setAside);
  if (carried.injections.size > 0) out.push('', '## Suspected injections', '', ...carried.injections);

  let text = `${out.join('\n')}\n`;
  while (capBytes(text) > OUTPUT_CAPS.mergerBytes && out.length > 4) {
    out.splice(out.length - 2, 2);
    text = `${out.join('\n')}\n`;
  }
  return text;
}
