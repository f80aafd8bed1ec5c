/**
 * The blind evaluation from mechanical facts only: which citations the workflow verified
 * against the repository (or the fetched pages), which request terms each answer covers, which
 * files the answers agree on, and where their "most likely file" claims differ. Emits the
 * closed evaluation contract (docs/behaviour.md#c2) as JSON only.
 */
import { SCHEMA } from '../../contracts/constants.js';
import { codeSpan } from './answer.js';
import type { CitedLine, PathCheck, UrlCheck } from './citations.js';
import { describeStatus, parseChecks, parseCitedLines, summaryClaim } from './citations.js';
import { compareStrings } from './strategy.js';
import type { Term } from './terms.js';
import { extractTerms, requestFields, termsIn } from './terms.js';
import { asArray, asRecord, asString } from './transcript.js';

const IDS = ['A', 'B', 'C'] as const;
type Id = (typeof IDS)[number];
const LIST_CAP = 10;
const PLAN_CAP = 40;
const QUOTE_CHARS = 160;

interface Checked {
  citation: string;
  path: string;
  line: number;
  status: string;
  quote: string | null;
}

export interface CandidateFacts {
  id: Id;
  response: string;
  present: boolean;
  lines: Checked[];
  urls: UrlCheck[];
  covered: Term[];
  missing: Term[];
  claim: string | null;
}

function short(text: string, max = QUOTE_CHARS): string {
  const t = text.trim();
  return t.length <= max ? t : `${t.slice(0, max - 1)}…`;
}

function joinIds(ids: readonly string[]): string {
  if (ids.length <= 1) return ids.join('');
  return `${ids.slice(0, -1).join(', ')} and ${ids[ids.length - 1] as string}`;
}

function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** Pairs each cited line with its check; checks the parser did not see still count. */
function checkedLines(cited: readonly CitedLine[], checks: readonly PathCheck[]): Checked[] {
  const out: Checked[] = [];
  const seen = new Set<string>();
  for (const c of cited) {
    if (seen.has(c.citation)) continue;
    seen.add(c.citation);
    const check = checks.find((k) => k.citation === c.citation || (k.path === c.path && k.line === c.line));
    out.push({ citation: c.citation, path: c.path, line: c.line, status: check?.status ?? 'unchecked', quote: c.quote });
  }
  for (const k of checks) {
    const citation = `${k.path}:${k.line}`;
    if (seen.has(citation) || seen.has(k.citation)) continue;
    seen.add(citation);
    out.push({ citation, path: k.path, line: k.line, status: k.status, quote: k.quoted ?? null });
  }
  return out;
}

export function candidateFacts(blind: Record<string, unknown>): CandidateFacts[] {
  const canonical = asRecord(blind['canonical_input']);
  const terms = extractTerms(requestFields(asString(asRecord(canonical['request'])['text'])));
  const candidates = asArray(blind['candidates']).map(asRecord);
  const checks = asRecord(blind['citation_checks']);
  return IDS.map((id) => {
    const entry = candidates.find((c) => c['candidate_id'] === id);
    const response = asString(entry?.['response']);
    const parsed = parseChecks(checks[id]);
    const lines = checkedLines(parseCitedLines(response), parsed.paths);
    const covered = termsIn(response, terms);
    const verifiedFiles = new Map<string, number>();
    for (const l of lines) if (l.status === 'verified') verifiedFiles.set(l.path, (verifiedFiles.get(l.path) ?? 0) + 1);
    const topVerified = [...verifiedFiles.entries()].sort((a, b) => b[1] - a[1] || compareStrings(a[0], b[0]))[0]?.[0] ?? null;
    return {
      id,
      response,
      present: response.trim() !== '',
      lines,
      urls: parsed.urls,
      covered,
      missing: terms.filter((t) => !covered.includes(t)),
      claim: summaryClaim(response) ?? topVerified,
    };
  });
}

function assess(f: CandidateFacts, terms: number): Record<string, unknown> {
  const verified = f.lines.filter((l) => l.status === 'verified');
  const unquoted = f.lines.filter((l) => l.status === 'unquoted_verified_line');
  const unchecked = f.lines.filter((l) => l.status === 'unchecked');
  const failed = f.lines.filter((l) => !['verified', 'unquoted_verified_line', 'unchecked'].includes(l.status));
  const urlOk = f.urls.filter((u) => u.status === 'verified');
  const urlBad = f.urls.filter((u) => u.status !== 'verified');
  const claimVerified = f.claim === null ? 0 : verified.filter((l) => l.path === f.claim).length;

  const parts: string[] = [];
  if (!f.present) parts.push('No answer text was provided');
  else if (f.lines.length === 0 && f.urls.length === 0) parts.push('Makes no checkable citation');
  else {
    if (f.lines.length > 0) parts.push(`${verified.length} of ${plural(f.lines.length, 'repository citation', 'repository citations')} verified`);
    if (f.urls.length > 0) parts.push(`${urlOk.length} of ${plural(f.urls.length, 'web citation', 'web citations')} verified`);
  }
  parts.push(`covers ${f.covered.length} of ${plural(terms, 'request term', 'request terms')}`);
  parts.push(f.claim === null ? 'names no most likely location' : `names ${codeSpan(f.claim)} as the most likely location`);
  const summary = `${parts.join('; ')}.`.replace(/^./u, (c) => c.toUpperCase());

  const strengths: string[] = [];
  if (verified.length > 0) strengths.push(`${verified.length} of ${plural(f.lines.length, 'citation', 'citations')} verified against the repository`);
  if (urlOk.length > 0) strengths.push(`${urlOk.length} of ${plural(f.urls.length, 'web citation', 'web citations')} verified against the fetched pages`);
  if (f.covered.length > 0 && f.covered.length * 2 >= terms) strengths.push(`Covers the request terms ${f.covered.map((t) => t.word).join(', ')}`);
  if (f.claim !== null && claimVerified > 0) strengths.push(`Its most likely file, ${codeSpan(f.claim)}, is backed by ${plural(claimVerified, 'verified line', 'verified lines')}`);

  const limitations: string[] = [];
  if (f.lines.length === 0 && f.urls.length === 0) limitations.push('Cites no repository line or web page that could be checked');
  if (f.missing.length > 0) limitations.push(`Does not mention the request terms ${f.missing.map((t) => t.word).join(', ')}`);
  if (unquoted.length > 0) limitations.push(`${plural(unquoted.length, 'cited line exists', 'cited lines exist')} but ${unquoted.length === 1 ? 'is' : 'are'} not quoted`);
  if (unchecked.length > 0) limitations.push(`${plural(unchecked.length, 'citation', 'citations')} could not be checked`);
  if (f.claim === null) limitations.push('Does not name a most likely file');
  else if (claimVerified === 0 && f.lines.length > 0 && !/^https?:/u.test(f.claim)) limitations.push(`Its most likely file, ${codeSpan(f.claim)}, has no verified line`);

  const useful_contributions = [
    ...verified.map((l) => (l.quote ? `${codeSpan(l.citation)}: ${codeSpan(short(l.quote))}` : `${codeSpan(l.citation)} (verified)`)),
    ...urlOk.map((u) => `${u.url} (quoted passage verified)`),
  ].slice(0, LIST_CAP);

  const risks = [...failed.map((l) => `Cites ${codeSpan(l.citation)}, which ${describeStatus(l.status)}`), ...urlBad.map((u) => `Cites ${u.url}, which ${describeStatus(u.status)}`)].slice(0, LIST_CAP);
  if (failed.length + urlBad.length > LIST_CAP) risks.push(`${failed.length + urlBad.length - LIST_CAP} more citations failed their checks`);

  return { candidate_id: f.id, summary, strengths, limitations, useful_contributions, risks };
}

/** Who verified what: citation or URL → candidate ids, in first-seen order. */
function verifiedBy(facts: readonly CandidateFacts[]): { lines: Map<string, { ids: Id[]; path: string; line: number; quote: string | null }>; files: Map<string, Id[]>; urls: Map<string, Id[]> } {
  const lines = new Map<string, { ids: Id[]; path: string; line: number; quote: string | null }>();
  const files = new Map<string, Id[]>();
  const urls = new Map<string, Id[]>();
  const add = (map: Map<string, Id[]>, key: string, id: Id): void => {
    const ids = map.get(key) ?? [];
    if (!ids.includes(id)) ids.push(id);
    map.set(key, ids);
  };
  for (const f of facts) {
    for (const l of f.lines) {
      if (l.status !== 'verified') continue;
      const entry = lines.get(l.citation) ?? { ids: [], path: l.path, line: l.line, quote: l.quote };
      if (!entry.ids.includes(f.id)) entry.ids.push(f.id);
      entry.quote ??= l.quote;
      lines.set(l.citation, entry);
      add(files, l.path, f.id);
    }
    for (const u of f.urls) if (u.status === 'verified') add(urls, u.url, f.id);
  }
  return { lines, files, urls };
}

export function evaluate(blindInput: unknown): string {
  const blind = asRecord(blindInput);
  const facts = candidateFacts(blind);
  const terms = extractTerms(requestFields(asString(asRecord(asRecord(blind['canonical_input'])['request'])['text']))).length;
  const { lines, files, urls } = verifiedBy(facts);

  const agreements: string[] = [];
  for (const [path, ids] of files) if (ids.length >= 2) agreements.push(`${codeSpan(path)} is cited with verified lines by ${joinIds(ids)}`);
  for (const [citation, e] of lines) if (e.ids.length >= 2) agreements.push(`${codeSpan(citation)} is verified in ${joinIds(e.ids)}`);
  for (const [url, ids] of urls) if (ids.length >= 2) agreements.push(`${url} is cited with verified passages by ${joinIds(ids)}`);
  const claims = new Map<string, Id[]>();
  for (const f of facts) if (f.claim !== null) claims.set(f.claim, [...(claims.get(f.claim) ?? []), f.id]);
  for (const [claim, ids] of claims) if (ids.length >= 2) agreements.push(`${joinIds(ids)} ${ids.length === 2 ? 'both' : 'all'} name ${codeSpan(claim)} as the most likely location`);

  const conflicts: Record<string, unknown>[] = [];
  const must_resolve: string[] = [];
  if (claims.size >= 2) {
    const evidence = (target: string): [number, number, number] => {
      const verifiedLines = [...lines.values()].filter((e) => e.path === target).reduce((n, e) => n + e.ids.length, 0);
      return [verifiedLines + (urls.get(target)?.length ?? 0), (files.get(target) ?? urls.get(target) ?? []).length, claims.get(target)?.length ?? 0];
    };
    const ranked = [...claims.keys()].sort((a, b) => {
      const ea = evidence(a);
      const eb = evidence(b);
      return eb[0] - ea[0] || eb[1] - ea[1] || eb[2] - ea[2] || compareStrings(a, b);
    });
    const best = ranked[0] as string;
    const [bestLines, bestAnswers] = evidence(best);
    const others = ranked.slice(1).map((c) => `${codeSpan(c)} has ${plural(evidence(c)[0], 'verified citation', 'verified citations')}`);
    const topic = 'Which file is the most likely location for the objective';
    conflicts.push({
      topic,
      positions: facts.filter((f) => f.claim !== null).map((f) => ({ candidate_id: f.id, position: `Names ${codeSpan(f.claim as string)} as the most likely location (${plural(f.lines.filter((l) => l.path === f.claim && l.status === 'verified').length, 'verified line', 'verified lines')} there)` })),
      resolution:
        bestLines > 0
          ? `Prefer ${codeSpan(best)}: it has ${plural(bestLines, 'verified citation', 'verified citations')} from ${plural(bestAnswers, 'answer', 'answers')}, while ${others.join(', ')}.`
          : `No claimed file has a verified citation; state ${codeSpan(best)} only as the most frequently named location and say it is unverified.`,
    });
    must_resolve.push(`${topic}: ${ranked.map((c) => codeSpan(c)).join(' or ')}`);
  }

  const ordered = [...lines.entries()].sort((a, b) => b[1].ids.length - a[1].ids.length || IDS.indexOf(a[1].ids[0] as Id) - IDS.indexOf(b[1].ids[0] as Id));
  const must_include = ordered.slice(0, PLAN_CAP).map(([citation, e]) => ({
    candidate_id: e.ids[0] as Id,
    contribution: `${codeSpan(citation)}${e.quote ? `: ${codeSpan(short(e.quote))}` : ''} (verified in ${joinIds(e.ids)})`,
  }));
  for (const [url, ids] of urls) if (must_include.length < PLAN_CAP) must_include.push({ candidate_id: ids[0] as Id, contribution: `${url}: the quoted passage (verified in ${joinIds(ids)})` });

  const avoid = new Set<string>();
  for (const f of facts) {
    for (const l of f.lines) if (!['verified', 'unquoted_verified_line', 'unchecked'].includes(l.status) && !lines.has(l.citation)) avoid.add(`${codeSpan(l.citation)} (${describeStatus(l.status)})`);
    for (const u of f.urls) if (u.status !== 'verified' && !urls.has(u.url)) avoid.add(`${u.url} (${describeStatus(u.status)})`);
  }

  const evaluation = {
    schema_version: SCHEMA.evaluation,
    candidate_assessments: facts.map((f) => assess(f, terms)),
    agreements: agreements.slice(0, 2 * LIST_CAP),
    conflicts,
    synthesis_plan: { must_include, must_resolve, must_avoid: [...avoid].slice(0, PLAN_CAP) },
  };
  return JSON.stringify(evaluation);
}

/** Evaluator and repair turns: the repair input carries the original blind input. */
export function evaluatorInput(data: unknown): unknown {
  const rec = asRecord(data);
  return rec['original_blind_input'] !== undefined ? rec['original_blind_input'] : data;
}
