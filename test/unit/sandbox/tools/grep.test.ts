import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grepTool } from '../../../../sandbox/tools/grep.js';
import { errorText, FIXTURE_REPO, makeTempRepo, okText, removeTempRepo } from './helpers.js';

let tmp: string;
let outside: string;

beforeAll(async () => {
  tmp = await makeTempRepo({
    'src/a.ts': 'const needle = 1;\nconst other = 2;\n',
    'src/b.ts': 'no match here\n',
    'node_modules/dep/index.js': 'const needle = "dep";\n',
    '.git/config': 'needle in git\n',
    'big.txt': 'needle\n' + 'z'.repeat(1024 * 1024 + 10) + '\n',
    'long-line.txt': 'x'.repeat(20_000) + 'needle\nshort needle\n',
    'bin.dat': Buffer.from('needle\0binary'),
    'zz/many.txt': Array.from({ length: 2000 }, (_, i) => `needle ${i}`).join('\n'),
    'wide.txt': `needle ${'w'.repeat(1000)}\n`,
    'evil.txt': 'a'.repeat(40) + 'b\n',
  });
  outside = path.join(path.dirname(tmp), 'outside');
  await mkdir(outside);
  await writeFile(path.join(outside, 'secret.txt'), 'needle outside\n');
  await symlink(outside, path.join(tmp, 'out-dir'));
  await symlink(path.join(outside, 'secret.txt'), path.join(tmp, 'secret-link.txt'));
  await symlink('src/a.ts', path.join(tmp, 'inside-link.ts'));
});

afterAll(async () => {
  await removeTempRepo(tmp);
});

describe('grep', () => {
  it('prints path:line:text for matches in the fixture repo', async () => {
    const text = okText(await grepTool(FIXTURE_REPO, { pattern: 'main\\(\\)' }));
    expect(text.split('\n')).toEqual([
      'docs/guide.md:3:Run `main()` from src/index.ts.',
      'src/index.test.ts:3:if (main() !== \'TOTAL=5 PRODUCT=20!\') throw new Error(\'unexpected\');',
      'src/index.ts:4:export function main(): string {',
      'src/index.ts:11:console.log(main());',
      '[skipped: 1 binary file]',
    ]);
  });

  it('filters by glob, relative to path or to the root', async () => {
    const text = okText(await grepTool(FIXTURE_REPO, { pattern: 'export function', glob: '**/*.ts' }));
    expect(text.split('\n')).toEqual([
      'src/index.ts:4:export function main(): string {',
      'src/util/math.ts:2:export function add(a: number, b: number): number {',
      'src/util/math.ts:7:export function multiply(a: number, b: number): number {',
      'src/util/strings.ts:1:export function shout(text: string): string {',
    ]);
    expect(okText(await grepTool(FIXTURE_REPO, { pattern: 'export', path: 'src', glob: 'util/*.ts' }))).toContain('src/util/math.ts:2:');
    expect(okText(await grepTool(FIXTURE_REPO, { pattern: 'export', path: 'src', glob: 'src/util/m*.ts' }))).toContain('src/util/math.ts:2:');
    expect(okText(await grepTool(FIXTURE_REPO, { pattern: 'export', glob: '*.{md,json}' }))).toBe('[no matches]');
  });

  it('applies a slash-free glob to file names at any depth', async () => {
    expect(okText(await grepTool(FIXTURE_REPO, { pattern: 'return', glob: 'm*.ts' }))).toBe(
      'src/util/math.ts:3:  return a + b;\nsrc/util/math.ts:8:  return a * b;',
    );
  });

  it('searches a single file given as path', async () => {
    expect(okText(await grepTool(FIXTURE_REPO, { pattern: 'return', path: 'src/util/math.ts' }))).toBe(
      'src/util/math.ts:3:  return a + b;\nsrc/util/math.ts:8:  return a * b;',
    );
  });

  it('supports ignore_case and unicode property escapes', async () => {
    expect(okText(await grepTool(FIXTURE_REPO, { pattern: 'hello, world', ignore_case: true }))).toBe(
      "src/util/strings.ts:5:export const GREETING = 'Hello, World';\n[skipped: 1 binary file]",
    );
    expect(okText(await grepTool(FIXTURE_REPO, { pattern: 'hello, world', glob: '*.ts' }))).toBe('[no matches]');
    expect(okText(await grepTool(FIXTURE_REPO, { pattern: '^\\p{Lu}\\p{Ll}+ `', path: 'docs' }))).toBe('docs/guide.md:3:Run `main()` from src/index.ts.');
    // Not valid with the u flag but fine without it.
    expect(okText(await grepTool(FIXTURE_REPO, { pattern: 'TOTAL\\=5', path: 'src' }))).toContain('src/index.test.ts:3:');
  });

  it('strips CR from CRLF lines', async () => {
    expect(okText(await grepTool(FIXTURE_REPO, { pattern: 'two$', path: 'docs' }))).toBe('docs/notes.txt:2:crlf line two');
  });

  it('skips binary files, large files, long lines, .git and node_modules', async () => {
    const all = okText(await grepTool(tmp, { pattern: 'needle', max_matches: 1000 }));
    expect(all).not.toContain('node_modules');
    expect(all).not.toContain('.git/');
    expect(all).not.toContain('big.txt');
    expect(all).not.toContain('bin.dat');
    expect(all).toContain('long-line.txt:2:short needle');
    expect(all).not.toContain('long-line.txt:1:');
    expect(all).toContain('[skipped: 1 binary file, 1 file larger than 1048576 bytes, 1 line longer than 10000 characters]');
    expect(all).toContain('src/a.ts:1:const needle = 1;');
  });

  it('searches node_modules and .git when path points inside them', async () => {
    expect(okText(await grepTool(tmp, { pattern: 'needle', path: 'node_modules' }))).toBe('node_modules/dep/index.js:1:const needle = "dep";');
    expect(okText(await grepTool(tmp, { pattern: 'needle', path: '.git' }))).toBe('.git/config:1:needle in git');
  });

  it('never follows symlinks out of the root; in-root symlinked files are searched', async () => {
    const all = okText(await grepTool(tmp, { pattern: 'needle', max_matches: 1000 }));
    expect(all).not.toContain('outside');
    expect(all).not.toContain('secret');
    expect(all).toContain('inside-link.ts:1:const needle = 1;');
    expect(errorText(await grepTool(tmp, { pattern: 'needle', path: 'out-dir' }))).toBe('grep: path resolves outside the repository: out-dir');
  });

  it('caps matches and says so', async () => {
    const text = okText(await grepTool(tmp, { pattern: '^needle \\d+$', path: 'zz/many.txt', max_matches: 5 }));
    expect(text).toBe(
      [
        'zz/many.txt:1:needle 0',
        'zz/many.txt:2:needle 1',
        'zz/many.txt:3:needle 2',
        'zz/many.txt:4:needle 3',
        'zz/many.txt:5:needle 4',
        '[match limit reached: showing the first 5 matches; narrow pattern, path or glob, or raise max_matches]',
      ].join('\n'),
    );
    const exact = okText(await grepTool(tmp, { pattern: 'needle 1999', path: 'zz/many.txt', max_matches: 1 }));
    expect(exact).toBe('zz/many.txt:2000:needle 1999');
  });

  it('caps matches across files of a directory walk', async () => {
    const text = okText(await grepTool(FIXTURE_REPO, { pattern: 'number', path: 'src', max_matches: 3 }));
    expect(text).toBe(
      [
        'src/util/math.ts:1:/** Adds two numbers. */',
        'src/util/math.ts:2:export function add(a: number, b: number): number {',
        'src/util/math.ts:6:/** Multiplies two numbers. */',
        '[match limit reached: showing the first 3 matches; narrow pattern, path or glob, or raise max_matches]',
      ].join('\n'),
    );
  });

  it('caps output bytes', async () => {
    const text = okText(await grepTool(tmp, { pattern: 'needle', path: 'zz/many.txt', max_matches: 1000 }, { maxOutputBytes: 2048 }));
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(2048);
    expect(text).toMatch(/\[truncated: output reached the 2048-byte cap after \d+ matches\]$/);
  });

  it('cuts matched lines to 300 characters', async () => {
    const text = okText(await grepTool(tmp, { pattern: 'needle w', path: 'wide.txt' }));
    expect(text).toBe(`wide.txt:1:needle ${'w'.repeat(293)}…`);
  });

  it('stops a catastrophic regex instead of hanging', async () => {
    const started = Date.now();
    const text = okText(await grepTool(tmp, { pattern: '^(a+)+$', path: 'evil.txt' }, { regexTimeoutMs: 200 }));
    expect(Date.now() - started).toBeLessThan(5000);
    expect(text).toContain('[search stopped: the pattern ran longer than 200 ms on files starting at evil.txt');
  });

  it('flags a result cut by the regex watchdog as timer-cut, and an uncut one not', async () => {
    const cut = await grepTool(tmp, { pattern: '^(a+)+$', path: 'evil.txt' }, { regexTimeoutMs: 1 });
    expect(cut).toMatchObject({ ok: true, timerCut: true });
    const whole = await grepTool(tmp, { pattern: 'needle', path: 'wide.txt' });
    expect(whole.ok).toBe(true);
    expect('timerCut' in whole).toBe(false);
  });

  it('rejects bad arguments', async () => {
    expect(errorText(await grepTool(tmp, { pattern: '(' }))).toMatch(/^grep\.pattern is not a valid regular expression: /);
    expect(errorText(await grepTool(tmp, { pattern: '' }))).toBe('grep.pattern must not be empty');
    expect(errorText(await grepTool(tmp, { pattern: 'x', max_matches: 1001 }))).toBe('grep.max_matches must be an integer between 1 and 1000');
    expect(errorText(await grepTool(tmp, { pattern: 'x', ignore_case: 'yes' }))).toBe('grep.ignore_case must be a boolean');
    expect(errorText(await grepTool(tmp, { pattern: 'x', regex: true }))).toBe('grep contains unsupported key(s): regex');
    expect(errorText(await grepTool(tmp, { pattern: 'x', glob: '[[:bogus:]]' }))).toBe('grep: invalid glob: unknown character class [:bogus:]');
    expect(errorText(await grepTool(tmp, { pattern: 'x', path: '/etc' }))).toBe('grep: absolute path is outside the repository');
  });
});
