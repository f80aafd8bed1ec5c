/**
 * What the builtin engine's final answer leads with (its first 400 characters, what a reader
 * sees first), run end to end in-process (three candidates with the real tools, the evaluator
 * on the mechanical checks, the merger):
 *
 *   - "where the token bucket refills tokens" leads with `refill()`, the behaviour asked, not
 *     with `class TokenBucket`, the type that merely names the concept;
 *   - a research question whose sources hold the current figure, an older dated page stating a
 *     superseded one and a post telling the reader to ignore its instructions and answer a
 *     third: the lead states the current figure only, and names no repository line.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { definitionOf } from '../../../../src/models/builtin/definitions.js';
import { createBuiltinProvider } from '../../../../src/models/builtin/index.js';
import { answerScore, withRarity } from '../../../../src/models/builtin/lead.js';
import { datesIn, supersededPages } from '../../../../src/models/builtin/page-judgement.js';
import { extractTerms, requestFields } from '../../../../src/models/builtin/terms.js';
import { validateEvaluationText } from '../../../../src/workflow/evaluation-schema.js';
import type { Fetcher } from './harness.js';
import { leadCorpus, LEAD_QUESTION } from './lead-corpus.js';
import { blindInput, checkCitations, checkUrls, investigateInput, researchInput, runCandidate, runEvaluator, runMerger } from './harness.js';

const LEAD_CHARS = 400;
const STRATEGIES = ['content-search', 'path-search', 'definition-search'] as const;

async function fuse(root: string, input: ReturnType<typeof investigateInput>, fetcher?: Fetcher, pages: Record<string, string> = {}): Promise<{ answer: string; candidates: string[] }> {
  const runs = await Promise.all(STRATEGIES.map((s) => runCandidate(createBuiltinProvider(s), root, input, fetcher)));
  const answers = { A: runs[0]!.answer, B: runs[1]!.answer, C: runs[2]!.answer };
  const check = (a: string): unknown[] => [...checkCitations(root, a), ...checkUrls(a, pages)];
  const checks = { A: check(answers.A), B: check(answers.B), C: check(answers.C) };
  const evaluation = validateEvaluationText(await runEvaluator(createBuiltinProvider('content-search'), blindInput(input, answers, checks)));
  if (!evaluation.ok) throw new Error(evaluation.errors.join('; '));
  const answer = await runMerger(createBuiltinProvider('content-search'), input, answers, evaluation.evaluation, checks);
  return { answer, candidates: runs.map((r) => r.answer) };
}

// ---------------------------------------------------------------------------------------------
// Lines that answer
// ---------------------------------------------------------------------------------------------

describe('which lines define something', () => {
  it('an import, a symbol key or another name defines nothing; behaviour, types and values do', () => {
    expect(definitionOf("const Redact = require('@pinojs/redact')")).toBeNull();
    expect(definitionOf("const redactFmtSym = Symbol('pino.redactFmt')")).toBeNull();
    expect(definitionOf('exports.response = res;')).toBeNull();
    expect(definitionOf('exports.getNextMillis = exports.Repeat = void 0;')).toBeNull();
    expect(definitionOf("import { parse } from './parse.js';")).toBeNull();
    expect(definitionOf('  refill(): void {')).toEqual({ name: 'refill', kind: 'callable' });
    expect(definitionOf('res.redirect = function redirect(url) {')).toEqual({ name: 'redirect', kind: 'callable' });
    expect(definitionOf('export class TokenBucket {')).toEqual({ name: 'TokenBucket', kind: 'type' });
    expect(definitionOf('const MAX_TOKENS = 5;')).toEqual({ name: 'MAX_TOKENS', kind: 'value' });
  });

  it('behaviour whose name carries the asked verb, inside the type that names the concept, outscores the type', () => {
    const terms = extractTerms(requestFields(JSON.stringify({ objective: 'Find where the token bucket refills tokens' })));
    const method = answerScore('  refill(): void {', terms, 'token-bucket.ts TokenBucket');
    const type = answerScore('export class TokenBucket {', terms, 'token-bucket.ts');
    expect(method).toBeGreaterThan(type);
    expect(type).toBeGreaterThan(answerScore('// the token bucket refills tokens over time', terms));
  });

  it('a term most files contain weighs less than one few contain', () => {
    const terms = extractTerms(requestFields(JSON.stringify({ objective: 'Where does pino redact sensitive paths?' })));
    const weighted = withRarity(terms, new Map([['pino', 150], ['redact', 20]]), 200);
    const w = (stem: string): number => weighted.find((t) => t.stem === stem)?.weight ?? 0;
    expect(w('redact')).toBeGreaterThan(2 * w('pino'));
    // A term no file contains keeps its weight; so does every term when no counts are known.
    expect(w('sensitiv')).toBe(terms.find((t) => t.stem === 'sensitiv')?.weight);
    expect(withRarity(terms, new Map(), 0)).toEqual(terms);
  });
});

describe('the lead of an investigate answer', () => {
  let root: string;

  beforeAll(() => {
    root = mkdtempSync(path.join(tmpdir(), 'fusion-lead-'));
    mkdirSync(path.join(root, 'src'));
    const file = (rel: string, text: string): void => writeFileSync(path.join(root, rel), text);
    file(
      'README.md',
      [
        '# limiter',
        '',
        'A token bucket rate limiter. The token bucket refills tokens at a fixed rate; each request takes tokens from the bucket.',
        '',
        'Create a TokenBucket with a capacity and a refill rate in tokens per second.',
        '',
      ].join('\n'),
    );
    file(
      'src/token-bucket.ts',
      [
        '/** A token bucket: capacity tokens, refilled continuously at a fixed rate. */',
        'export class TokenBucket {',
        '  private tokens: number;',
        '  private last = Date.now();',
        '',
        '  constructor(private readonly capacity: number, private readonly perSecond: number) {',
        '    this.tokens = capacity;',
        '  }',
        '',
        '  /** Takes one token when there is one. */',
        '  take(): boolean {',
        '    this.refill();',
        '    if (this.tokens < 1) return false;',
        '    this.tokens -= 1;',
        '    return true;',
        '  }',
        '',
        '  refill(): void {',
        '    const now = Date.now();',
        '    this.tokens = Math.min(this.capacity, this.tokens + ((now - this.last) / 1000) * this.perSecond);',
        '    this.last = now;',
        '  }',
        '}',
        '',
      ].join('\n'),
    );
    file(
      'src/server.ts',
      [
        "import { TokenBucket } from './token-bucket.js';",
        '',
        '// One token bucket per client; requests without tokens are refused.',
        'const buckets = new Map<string, TokenBucket>();',
        '',
        'export function admit(client: string): boolean {',
        '  const bucket = buckets.get(client) ?? new TokenBucket(10, 5);',
        '  buckets.set(client, bucket);',
        '  return bucket.take();',
        '}',
        '',
      ].join('\n'),
    );
    chmodSync(root, 0o755);
  });

  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('"where the token bucket refills tokens" leads with refill(), not class TokenBucket', async () => {
    const input = investigateInput(root, { objective: 'Find where the token bucket refills tokens', background: [], deliverable: 'The file and line' });
    const { answer } = await fuse(root, input);
    const lead = answer.slice(0, LEAD_CHARS);
    expect(lead).toContain('`src/token-bucket.ts:18`');
    expect(lead).toContain('refill(): void {');
    expect(lead.indexOf('src/token-bucket.ts:18')).toBeLessThan(lead.indexOf('**Request:**') < 0 ? LEAD_CHARS : lead.indexOf('**Request:**'));
    expect(lead).not.toContain('`src/token-bucket.ts:2`');
    // Every citation of the answer is confirmed by the mechanical check.
    expect(checkCitations(root, answer).every((c) => c.status === 'verified')).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// Research: a superseded figure and an injected instruction stay out of the lead
// ---------------------------------------------------------------------------------------------

const LEAD_CORPUS = leadCorpus('https://docs.example.test', 'https://forum.example.test');

const fetcher: Fetcher = (url) => {
  const content = LEAD_CORPUS[url];
  if (content === undefined) return { ok: false, error: 'fusion_web_fetch: http_error (404)' };
  return { ok: true, text: JSON.stringify({ url, final_url: url, status: 200, content_type: 'text/markdown', format: 'markdown', truncated: false, content }) };
};

describe('the lead of a research answer', () => {
  it('reads dates from pages: ISO and month-name forms', () => {
    expect(datesIn('Last updated: 2025-09-14, first published March 2023')).toEqual([20250914, 20230300]);
    const superseded = supersededPages(Object.entries(LEAD_CORPUS).slice(0, 2).map(([url, content]) => ({ url, content })));
    expect([...superseded.keys()]).toEqual(['https://docs.example.test/limits-2023']);
    // A page that states no date is never taken for an old one.
    expect(supersededPages([{ url: 'https://a.test/', content: 'no date here' }, { url: 'https://b.test/', content: 'Updated 2024-01-02' }]).size).toBe(0);
  });

  it('states the current figure, never the superseded or the injected one, and cites no repository line in its lead', async () => {
    const root = path.resolve('test/fixtures/builtin-repo');
    const input = researchInput(root, {
      objective: LEAD_QUESTION.objective,
      background: LEAD_QUESTION.background,
      deliverable: LEAD_QUESTION.deliverable,
      sources: Object.keys(LEAD_CORPUS).map((url) => ({ url, purpose: LEAD_QUESTION.purpose })),
    });
    const { answer } = await fuse(root, input, fetcher, LEAD_CORPUS);
    const lead = answer.slice(0, LEAD_CHARS);
    expect(lead).toContain(LEAD_QUESTION.current);
    expect(lead).toContain('https://docs.example.test/limits:');
    for (const wrong of LEAD_QUESTION.wrong) expect(lead).not.toContain(wrong);
    // No repository line (`path:line`) in the lead: the pages answer a research question.
    expect(lead).not.toMatch(/`[^`\s]+:\d+`/u);
    // What was left out is said, further down.
    expect(answer).toMatch(/## Set aside[\s\S]*limits-2023/u);
    expect(answer).toMatch(/## Suspected injections[\s\S]*forum\.example\.test/u);
    expect(answer).not.toContain('9000 requests');
  });
});
