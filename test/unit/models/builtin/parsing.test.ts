import { describe, expect, it } from 'vitest';
import { codeSpan, compressAnswer } from '../../../../src/models/builtin/answer.js';
import { codeSpans, parseCitedLines, summaryClaim } from '../../../../src/models/builtin/citations.js';
import { definedName } from '../../../../src/models/builtin/definitions.js';
import { extractTerms, requestFields, stem } from '../../../../src/models/builtin/terms.js';
import { parseFind, parseGrep, parseLs, parseRead } from '../../../../src/models/builtin/tool-output.js';
import { isToolErrorText } from '../../../../src/models/builtin/transcript.js';
import { runTool } from '../../../../sandbox/tools/index.js';
import { IPADDR_ROOT } from './harness.js';

function request(fields: Record<string, unknown>): string {
  return JSON.stringify({ background: [], constraints: [], deliverable: 'report', scope: [], ...fields });
}

describe('terms', () => {
  it('derives stemmed, weighted terms and drops stopwords and generic words', () => {
    const terms = extractTerms(requestFields(request({ objective: 'Find where IPv4 CIDR ranges are parsed' })));
    expect(terms.map((t) => t.stem)).toEqual(['ipv4', 'cidr', 'rang', 'pars']);
    expect(terms[0]?.identifier).toBe(true);
  });

  it('keeps identifiers: camelCase, snake_case, dotted and quoted names', () => {
    const terms = extractTerms(requestFields(request({ objective: 'Where is parseCidr called from load_config and `retryLimit`?', background: ['See ipaddr.IPv4.subnetMatch'] })));
    expect(terms.map((t) => t.stem)).toEqual(expect.arrayContaining(['parsecidr', 'load_config', 'retrylimit', 'subnetmatch']));
  });

  it('weights the objective over the deliverable and keeps at most six', () => {
    const terms = extractTerms(requestFields(request({ objective: 'tokenizer', deliverable: 'alpha bravo charlie delta echoes foxtrot golfing' })));
    expect(terms[0]?.stem).toBe('tokenizer');
    expect(terms).toHaveLength(6);
  });

  it('stems inflections together', () => {
    expect(new Set(['parse', 'parsed', 'parsing', 'parses'].map(stem))).toEqual(new Set(['pars']));
    expect(stem('addresses')).toBe('address');
    expect(stem('classes')).toBe('class');
    expect(stem('matches')).toBe('match');
  });
});

describe('tool output parsers (real tool output)', () => {
  it('parses read, grep, find and ls exactly as the tools print them', async () => {
    const read = await runTool('read', IPADDR_ROOT, { path: 'lib/ipaddr.js', offset: 415, limit: 2 });
    expect(read.ok && parseRead(read.text)[0]).toEqual({ line: 415, text: '    ipaddr.IPv4.parseCIDR = function (string) {' });
    const grep = await runTool('grep', IPADDR_ROOT, { pattern: 'IPv4\\.parseCIDR =', max_matches: 1 });
    expect(grep.ok && parseGrep(grep.text)).toEqual([{ path: 'lib/ipaddr.js', line: 415, text: '    ipaddr.IPv4.parseCIDR = function (string) {', cut: false }]);
    const find = await runTool('find', IPADDR_ROOT, { pattern: 'li*' });
    expect(find.ok && parseFind(find.text)).toEqual({ files: [], dirs: ['lib'] });
    const ls = await runTool('ls', IPADDR_ROOT, {});
    expect(ls.ok && parseLs(ls.text)).toEqual({ files: ['LICENSE', 'README.md', 'package.json'], dirs: ['lib'] });
    const none = await runTool('grep', IPADDR_ROOT, { pattern: 'zqxwv' });
    expect(none.ok && parseGrep(none.text)).toEqual([]);
  });

  it('recognises tool errors but not results that look alike', async () => {
    const bad = await runTool('read', IPADDR_ROOT, { path: 'lib' });
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(isToolErrorText(bad.error)).toBe(true);
    expect(isToolErrorText('grep arguments must be an object')).toBe(true);
    expect(isToolErrorText('Error: boom')).toBe(true);
    expect(isToolErrorText('{"error":{"code":"blocked_address"}}')).toBe(true);
    expect(isToolErrorText('grep.ts:3:const x = 1;')).toBe(false);
    expect(isToolErrorText('error.ts\nlib/')).toBe(false);
    expect(isToolErrorText('415\tipaddr.IPv4.parseCIDR = function (string) {')).toBe(false);
  });
});

describe('definitions and citations', () => {
  it('names what a line defines', () => {
    expect(definedName('    ipaddr.IPv4.parseCIDR = function (string) {')).toBe('parseCIDR');
    expect(definedName('export async function loadConfig(path) {')).toBe('loadConfig');
    expect(definedName('const parse = (text) => text;')).toBe('parse');
    expect(definedName('def parse_cidr(value):')).toBe('parse_cidr');
    expect(definedName('  parsePrimary() {')).toBe('parsePrimary');
    expect(definedName('    if (x) {')).toBeNull();
    expect(definedName('    const token = read(source);')).toBeNull();
  });

  it('round-trips code spans, including text with backticks', () => {
    for (const text of ['plain', 'a `b` c', '``x``', '`edge']) expect(codeSpans(codeSpan(text))).toEqual([text]);
  });

  it('reads citations, quotes and the summary claim back from an answer', () => {
    const answer = ['## Findings', '', '- `src/a.ts:3` — x', '  > `` const s = `t`; ``', '- `b.py:9`', '', '## Summary', '', 'The most likely file is `src/a.ts`.'].join('\n');
    expect(parseCitedLines(answer)).toEqual([
      { citation: 'src/a.ts:3', path: 'src/a.ts', line: 3, quote: 'const s = `t`;' },
      { citation: 'b.py:9', path: 'b.py', line: 9, quote: null },
    ]);
    expect(summaryClaim(answer)).toBe('src/a.ts');
  });
});

describe('compression', () => {
  it('drops findings from the end until the answer fits the cap', () => {
    const findings = Array.from({ length: 50 }, (_, i) => [`- \`src/f.ts:${i + 1}\` — usage`, `  > \`line ${i + 1} ${'x'.repeat(60)}\``].join('\n'));
    const answer = ['Intro text.', '', '## Findings', '', ...findings, '', '## Summary', '', 'The most likely file is `src/f.ts`.', '', 'More words.', ''].join('\n');
    const short = compressAnswer(answer, 2000);
    expect(Buffer.byteLength(JSON.stringify(short))).toBeLessThanOrEqual(2000);
    expect(short).toContain('- `src/f.ts:1` — usage');
    expect(short).not.toContain('src/f.ts:50');
    expect(short).toContain('The most likely file is `src/f.ts`.');
    expect(short).not.toContain('More words.');
    expect(parseCitedLines(short).every((c) => c.quote !== null)).toBe(true);
  });
});
