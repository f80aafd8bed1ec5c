/**
 * Research candidate: fetch every declared source once (plus one grep of the terms in the
 * repository), split each page into passages, drop the passages that instruct the reader
 * (suspected injections) and the pages about another version of the subject than the one asked,
 * rank the rest with BM25 against the request terms, and answer first (the sentences that answer
 * the question, cited and quoted), then the evidence passages quoted verbatim, then what was
 * set aside and why.
 */
import type { Finding } from './answer.js';
import { codeSpan, renderFinding } from './answer.js';
import { bm25, splitPassages } from './bm25.js';
import type { Passage, Scored } from './bm25.js';
import { SOURCE_GLOB, termsAlternation } from './candidate-path.js';
import { definedName } from './definitions.js';
import type { Phase, SearchContext, Strategy } from './strategy.js';
import { compareStrings } from './strategy.js';
import { termWeight, termsIn } from './terms.js';
import type { Batch, PlannedCall } from './transcript.js';
import { asRecord, asString } from './transcript.js';
import { parseGrep, pathPrior, quotable } from './tool-output.js';
import { answerSentences, injectionReason, requestedVersions, setAsideReason, supersededPages } from './page-judgement.js';

export const FETCH_TOOL = 'fusion_web_fetch';
const MAX_SOURCES = 12;
const MAX_PASSAGES = 6;
const PER_SOURCE = 3;
const REPO_FINDINGS = 3;

export interface ResearchContext extends SearchContext {
  /** Declared canonical URLs, in declaration order. */
  urls: string[];
}

interface Page {
  url: string;
  passages: Passage[];
}

interface PagePassage extends Passage {
  url: string;
}

const fetchAll: Phase = (ctx) => {
  const urls = (ctx as ResearchContext).urls.slice(0, MAX_SOURCES);
  const calls: PlannedCall[] = urls.map((url) => ({ name: FETCH_TOOL, args: { url } }));
  // Source files only: documentation would repeat the pages; the code shows what is implemented.
  if (ctx.terms.length > 0) calls.push({ name: 'grep', args: { pattern: termsAlternation(ctx.terms), glob: SOURCE_GLOB, ignore_case: true, max_matches: 300 } });
  return calls;
};

/** A fetch result is the JSON text of `{url, final_url, status, content_type, format, truncated, content}`. */
export function parseFetch(text: string): { url: string; content: string } | null {
  try {
    const rec = asRecord(JSON.parse(text) as unknown);
    const content = rec['content'];
    if (typeof content !== 'string') return null;
    return { url: asString(rec['url']), content };
  } catch {
    return null;
  }
}

/** Best passages: first the best of every page that matched, then the rest by score. */
export function selectPassages(scored: readonly Scored<PagePassage>[], max = MAX_PASSAGES, perSource = PER_SOURCE): Scored<PagePassage>[] {
  const ordered = scored
    .filter((s) => s.score > 0)
    .sort((a, b) => b.score - a.score || compareStrings(a.item.url, b.item.url) || a.item.index - b.item.index);
  const picked: Scored<PagePassage>[] = [];
  const count = new Map<string, number>();
  for (const s of ordered) {
    if (picked.length >= max) break;
    if ((count.get(s.item.url) ?? 0) > 0) continue;
    picked.push(s);
    count.set(s.item.url, 1);
  }
  for (const s of ordered) {
    if (picked.length >= max) break;
    if (picked.includes(s) || (count.get(s.item.url) ?? 0) >= perSource) continue;
    picked.push(s);
    count.set(s.item.url, (count.get(s.item.url) ?? 0) + 1);
  }
  return picked;
}

function quoteLines(text: string): string[] {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .map((l) => `  > ${l}`);
}

interface SetAside {
  url: string;
  reason: string;
}

interface Injection {
  url: string;
  passage: number;
  reason: string;
}

function answer(ctx: SearchContext, done: readonly Batch[]): string {
  const { terms } = ctx;
  const pages: Page[] = [];
  const problems: string[] = [];
  const repoHits: Finding[] = [];
  const asked = requestedVersions(ctx.fields);
  const setAside: SetAside[] = [];
  const injections: Injection[] = [];
  const contents = new Map<string, string>();
  for (const e of done[0] ?? []) {
    if (e.name === FETCH_TOOL) {
      const url = asString(e.args['url']);
      const parsed = e.ok ? parseFetch(e.text) : null;
      if (parsed === null) {
        const first = (e.text.split('\n')[0] ?? '').slice(0, 200);
        problems.push(`${url} could not be fetched: ${first || 'no content'}`);
        continue;
      }
      const pageUrl = url || parsed.url;
      // Pages are data: a passage that instructs the reader is reported, never used.
      const passages = splitPassages(parsed.content).filter((p) => {
        const reason = injectionReason(p.text);
        if (reason !== null) injections.push({ url: pageUrl, passage: p.index + 1, reason });
        return reason === null;
      });
      const aside = setAsideReason(parsed.content, asked);
      if (aside !== null) {
        setAside.push({ url: pageUrl, reason: aside });
        continue;
      }
      pages.push({ url: pageUrl, passages });
      contents.set(pageUrl, parsed.content);
    } else if (e.name === 'grep' && e.ok) {
      const ranked = parseGrep(e.text)
        .filter((h) => !h.cut && quotable(h.text))
        .map((h) => {
          const name = definedName(h.text);
          return { h, s: (termWeight(termsIn(h.text, terms)) + (name === null ? 0 : 2 + termWeight(termsIn(name, terms)))) * pathPrior(h.path) };
        })
        .sort((a, b) => b.s - a.s || compareStrings(a.h.path, b.h.path) || a.h.line - b.h.line);
      for (const { h } of ranked.slice(0, REPO_FINDINGS)) {
        const name = definedName(h.text);
        repoHits.push(name === null ? { path: h.path, line: h.line, text: h.text, kind: 'usage' } : { path: h.path, line: h.line, text: h.text, kind: 'definition', note: `defines ${name}` });
      }
    }
  }
  if (asked.length === 0) {
    // No version asked: of the pages that answer, one about an older version or dated earlier
    // than another states what was true then (page-judgement.ts), and is set aside.
    const best = new Map(pages.map((p) => [p.url, answerSentences(p.passages.map((x) => ({ url: p.url, text: x.text })), terms, ctx.fields.objective, asked, 1)[0]?.score ?? 0]));
    const top = Math.max(0, ...best.values());
    const answering = pages.filter((p) => top > 0 && (best.get(p.url) ?? 0) >= 0.5 * top);
    const superseded = supersededPages(answering.map((p) => ({ url: p.url, content: contents.get(p.url) ?? '' })));
    for (const [url, reason] of superseded) setAside.push({ url, reason });
    pages.splice(0, pages.length, ...pages.filter((p) => !superseded.has(p.url)));
  }
  const all: PagePassage[] = pages.flatMap((p) => p.passages.map((x) => ({ ...x, url: p.url })));
  const picked = selectPassages(bm25(all, (p) => p.text, terms));
  const answers = answerSentences(
    picked.map((s) => ({ url: s.item.url, text: s.item.text })),
    terms,
    ctx.fields.objective,
    asked,
  );

  // The answer first: the sentences that answer the question, each cited and quoted.
  const out: string[] = ['## Answer', ''];
  if (answers.length === 0) out.push('No passage of the fetched pages answers the question.');
  for (const a of answers) out.push(`According to ${a.url}:`, `> ${a.text}`, '');
  if (setAside.length > 0) out.push(`Set aside: ${setAside.map((x) => `${x.url} (${x.reason})`).join('; ')}.`, '');
  if (injections.length > 0) out.push(`${injections.length === 1 ? 'One passage' : `${injections.length} passages`} of the fetched pages ${injections.length === 1 ? 'gives' : 'give'} instructions to the reader and ${injections.length === 1 ? 'was' : 'were'} not used (see Suspected injections).`, '');
  if (out[out.length - 1] === '') out.pop();

  out.push('', '## Evidence', '');
  out.push(`Search terms: ${terms.length > 0 ? terms.map((t) => codeSpan(t.word)).join(', ') : '(none could be derived from the request)'}. Method: fetched ${pages.length + setAside.length} of ${(ctx as ResearchContext).urls.length} declared sources, split them into passages and ranked them by BM25 against the terms.`, '');
  if (picked.length === 0) out.push('No passage of the fetched pages matched the search terms.');
  for (const s of picked) {
    out.push(`- ${s.item.url} — passage ${s.item.index + 1}; matches ${s.matched.map((t) => t.word).join(', ')} (BM25 ${s.score.toFixed(2)})`);
    out.push(...quoteLines(s.item.text));
  }
  if (repoHits.length > 0) {
    out.push('', 'Repository lines that mention the same terms:', '');
    for (const f of repoHits) out.push(renderFinding(f, terms));
  }
  if (setAside.length > 0) {
    out.push('', '## Set aside', '');
    for (const x of setAside) out.push(`- ${x.url}: not used, because ${x.reason}.`);
  }
  if (injections.length > 0) {
    out.push('', '## Suspected injections', '');
    for (const x of injections) out.push(`- ${x.url}, passage ${x.passage}: ${x.reason}; treated as data and not used as evidence.`);
  }
  const covered = new Set(picked.flatMap((s) => s.matched));
  const missing = terms.filter((t) => !covered.has(t));
  if (picked.length === 0 || missing.length > 0 || problems.length > 0) {
    out.push('', '## Not verified', '');
    if (missing.length > 0) out.push(`- No cited passage contains: ${missing.map((t) => codeSpan(t.word)).join(', ')}.`);
    for (const p of problems) out.push(`- ${p}`);
    if (picked.length === 0 && problems.length === 0 && missing.length === 0) out.push('- Nothing could be cited.');
  }
  return `${out.join('\n')}\n`;
}

export const researchSearch: Strategy = { name: 'research', phases: [fetchAll], answer };
