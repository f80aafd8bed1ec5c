import { describe, expect, it } from 'vitest';
import { bm25, splitPassages, tokenize } from '../../../../src/models/builtin/bm25.js';
import { parseCitedUrls } from '../../../../src/models/builtin/citations.js';
import { createBuiltinProvider } from '../../../../src/models/builtin/index.js';
import { extractTerms, requestFields } from '../../../../src/models/builtin/terms.js';
import { validateEvaluationText } from '../../../../src/workflow/evaluation-schema.js';
import type { Fetcher } from './harness.js';
import { blindInput, checkCitations, checkUrls, IPADDR_ROOT, researchInput, runCandidate, runEvaluator, runMerger } from './harness.js';

const CIDR_PAGE = [
  '# Classless Inter-Domain Routing',
  '',
  'The web was built on many protocols. This introduction talks about history and people.',
  '',
  'CIDR notation writes an IPv4 network as an address, a slash and a prefix length, for example 192.168.0.0/16.',
  'Parsing a CIDR range means splitting at the slash and checking that the prefix length is between 0 and 32.',
  '',
  'Unrelated closing words about the weather and gardening.',
].join('\n');

const OTHER_PAGE = ['Release notes', '', 'Version 2 fixes a typo in the documentation and updates dependencies.', '', 'IPv4 addresses are mentioned once here.'].join('\n');

const PAGES: Record<string, string> = {
  'https://docs.example.com/cidr': CIDR_PAGE,
  'https://docs.example.com/notes': OTHER_PAGE,
};

const fetcher: Fetcher = (url) => {
  const content = PAGES[url];
  if (content === undefined) return { ok: false, error: 'fusion_web_fetch: http_error (404)' };
  return { ok: true, text: JSON.stringify({ url, final_url: url, status: 200, content_type: 'text/markdown', format: 'markdown', truncated: false, content }) };
};

const ARGS = {
  objective: 'Explain how IPv4 CIDR ranges are parsed',
  background: [],
  deliverable: 'The parsing rule with sources',
  sources: [
    { url: 'https://docs.example.com/notes', purpose: 'release notes' },
    { url: 'https://docs.example.com/cidr', purpose: 'CIDR reference' },
    { url: 'https://docs.example.com/gone', purpose: 'a page that no longer exists' },
  ],
};

describe('bm25 and passages', () => {
  it('splits pages into exact-substring passages of bounded size', () => {
    const long = `${'alpha beta gamma '.repeat(80)}end`;
    const passages = splitPassages(`${CIDR_PAGE}\n\n${long}`);
    for (const p of passages) {
      expect(`${CIDR_PAGE}\n\n${long}`).toContain(p.text);
      expect(p.text.length).toBeLessThanOrEqual(500);
    }
    expect(passages.length).toBeGreaterThan(5);
  });

  it('ranks the passage that carries the terms first, and tokenizes camelCase', () => {
    const terms = extractTerms(requestFields(JSON.stringify(ARGS)));
    const passages = splitPassages(CIDR_PAGE);
    const ranked = bm25(passages, (p) => p.text, terms).sort((a, b) => b.score - a.score);
    expect(ranked[0]?.item.text).toContain('Parsing a CIDR range');
    expect(ranked[ranked.length - 1]?.score).toBe(0);
    expect(tokenize('parseCIDR ip_addr')).toEqual(['parsecidr', 'parse', 'cidr', 'ip_addr', 'ip', 'addr']);
  });
});

describe('builtin research candidate', () => {
  const input = researchInput(IPADDR_ROOT, ARGS);

  it('fetches every declared source, cites the best passages verbatim, and reports failures', async () => {
    const run = await runCandidate(createBuiltinProvider('path-search'), IPADDR_ROOT, input, fetcher);
    const fetches = run.calls.filter((c) => c.startsWith('fusion_web_fetch('));
    expect(fetches).toEqual(ARGS.sources.map((s) => `fusion_web_fetch(${JSON.stringify({ url: s.url })})`));
    const cited = parseCitedUrls(run.answer).filter((u) => u.quotes.length > 0);
    expect(cited[0]?.url).toBe('https://docs.example.com/cidr');
    expect(cited[0]?.quotes.join('\n')).toContain('Parsing a CIDR range means splitting at the slash');
    expect(checkUrls(run.answer, PAGES).every((c) => c.status === 'verified')).toBe(true);
    expect(run.answer).toContain('https://docs.example.com/gone could not be fetched: fusion_web_fetch: http_error (404)');
    // The answer comes first: the sentence that answers, cited and quoted.
    expect(run.answer.startsWith('## Answer\n\nAccording to https://docs.example.com/cidr:\n> Parsing a CIDR range means splitting at the slash')).toBe(true);
    // Repository lines that share the terms are cited too, and verify.
    expect(checkCitations(IPADDR_ROOT, run.answer).every((c) => c.status === 'verified')).toBe(true);
    const again = await runCandidate(createBuiltinProvider('content-search'), IPADDR_ROOT, input, fetcher);
    expect(again.answer).toBe(run.answer);
  });

  it('flows through evaluation and merge with web citations', async () => {
    const run = await runCandidate(createBuiltinProvider('definition-search'), IPADDR_ROOT, input, fetcher);
    const answers = { A: run.answer, B: run.answer, C: run.answer };
    const urlChecks = checkUrls(run.answer, PAGES);
    const pathChecks = checkCitations(IPADDR_ROOT, run.answer);
    const checks = { A: [...pathChecks, ...urlChecks], B: [...pathChecks, ...urlChecks], C: [...pathChecks, ...urlChecks] };
    const text = await runEvaluator(createBuiltinProvider('content-search'), blindInput(input, answers, checks));
    const result = validateEvaluationText(text);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.evaluation.agreements).toContain('https://docs.example.com/cidr is cited with verified passages by A, B and C');
    const merged = await runMerger(createBuiltinProvider('content-search'), input, answers, result.evaluation, checks);
    expect(merged).toContain('## Web sources');
    expect(merged).toContain('- https://docs.example.com/cidr');
    expect(checkUrls(merged, PAGES).every((c) => c.status === 'verified')).toBe(true);
  });
});

describe('builtin merger decides per passage', () => {
  const input = researchInput(IPADDR_ROOT, ARGS);
  /** A real URL with one real and one invented passage (what a stumbling model writes). */
  const INVENTED = [
    '## Findings',
    '',
    '- https://docs.example.com/cidr — the parsing rule',
    '  > Parsing a CIDR range means splitting at the slash and checking that the prefix length is between 0 and 32.',
    '',
    '- https://docs.example.com/cidr — a claim the page never makes',
    '  > CIDR ranges are always parsed with a regular expression that accepts prefix lengths up to 64.',
    '',
  ].join('\n');

  it('quotes only the passages whose own check confirmed them, never the invented one', async () => {
    const answers = { A: INVENTED, B: INVENTED, C: INVENTED };
    const urlChecks = checkUrls(INVENTED, PAGES);
    expect(urlChecks.map((c) => c.status)).toEqual(['verified', 'quote_not_found']);
    const checks = { A: urlChecks, B: urlChecks, C: urlChecks };
    const result = validateEvaluationText(await runEvaluator(createBuiltinProvider('content-search'), blindInput(input, answers, checks)));
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const merged = await runMerger(createBuiltinProvider('content-search'), input, answers, result.evaluation, checks);
    expect(merged).toContain('Parsing a CIDR range means splitting at the slash');
    expect(merged).not.toContain('accepts prefix lengths up to 64');
    expect(merged).toContain('Unconfirmed: 1 quoted passage attributed to https://docs.example.com/cidr was not found on the page as fetched and is left out.');
    expect(checkUrls(merged, PAGES).every((c) => c.status === 'verified')).toBe(true);
  });

  it('without a confirming check, no passage is quoted as found', async () => {
    const answers = { A: INVENTED, B: INVENTED, C: INVENTED };
    const none = { A: [], B: [], C: [] };
    const result = validateEvaluationText(await runEvaluator(createBuiltinProvider('content-search'), blindInput(input, answers, none)));
    if (!result.ok) throw new Error(result.errors.join('; '));
    const merged = await runMerger(createBuiltinProvider('content-search'), input, answers, result.evaluation, none);
    expect(merged).not.toContain('> ');
    expect(merged).not.toMatch(/confirmed passages|(?:was|were) found on the page/u);
    expect(merged).toContain('Unconfirmed: 2 quoted passages attributed to https://docs.example.com/cidr were not found on the page as fetched and are left out.');
  });
});
