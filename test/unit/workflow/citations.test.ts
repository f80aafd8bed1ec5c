import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CITATION_LIMITS,
  checkUrlCitations,
  extractCitations,
  extractUrlCitations,
  quoteMatches,
  summarizeChecks,
} from '../../../src/contracts/citations.js';
import { checkCitations } from '../../../src/workflow/citations.js';

let base: string;
let repo: string;

beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'fusion-citations-'));
  repo = path.join(base, 'repo');
  await mkdir(path.join(repo, 'src'), { recursive: true });
  await writeFile(path.join(repo, 'src', 'app.ts'), ['import x from "y";', '', 'export function start() {', '  return   listen(8080);', '}', ''].join('\n'));
  await writeFile(path.join(repo, 'README.md'), 'line one\r\nline two\r\n');
  await writeFile(path.join(repo, 'binary.bin'), Buffer.from([0x41, 0x00, 0x42, 0x0a]));
  await writeFile(path.join(repo, 'big.txt'), Buffer.alloc(CITATION_LIMITS.maxFileBytes + 1, 0x61));
  await writeFile(path.join(base, 'secret.txt'), 'TOP SECRET\n');
  await symlink(path.join(base, 'secret.txt'), path.join(repo, 'escape.txt'));
  await symlink(base, path.join(repo, 'updir'));
  await symlink(path.join(repo, 'src', 'app.ts'), path.join(repo, 'inner-link.ts'));
  try {
    execFileSync('mkfifo', [path.join(repo, 'pipe')]);
  } catch {
    // mkfifo unavailable: the FIFO case is skipped below.
  }
});

afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

describe('extractCitations', () => {
  it('parses path:line, ranges, #L forms, columns and attached quotes', () => {
    const text = [
      'Findings:',
      '- `src/app.ts:3`',
      '  > `export function start() {`',
      '- `/repo/src/app.ts:3-5` and `./README.md#L2`',
      '',
      '> line two',
      'See `src/app.ts#L3-L4` and `src/app.ts:4:3`.',
      'Not citations: `npm test`, `localhost:8080`, `http://x.test:80`, `a b:1`.',
      '```ts',
      'const c = `src/app.ts:1`;',
      '```',
    ].join('\n');
    expect(extractCitations(text)).toEqual([
      { citation: 'src/app.ts:3', path: 'src/app.ts', line: 3, quoted: 'export function start() {' },
      { citation: '/repo/src/app.ts:3-5', path: 'src/app.ts', line: 3, endLine: 5 },
      { citation: './README.md#L2', path: 'README.md', line: 2, quoted: 'line two' },
      { citation: 'src/app.ts#L3-L4', path: 'src/app.ts', line: 3, endLine: 4 },
      { citation: 'src/app.ts:4:3', path: 'src/app.ts', line: 4 },
    ]);
  });

  it('collects consecutive quote lines into one quote', () => {
    const [c] = extractCitations('`src/app.ts:3-4`\n> `export function start() {`\n> `  return listen(8080);`\nprose');
    expect(c?.quoted).toBe('export function start() {\n  return listen(8080);');
  });

  it('caps at 200 citations', () => {
    const text = Array.from({ length: 250 }, (_, i) => `- \`f.ts:${i + 1}\``).join('\n');
    const all = extractCitations(text);
    expect(all).toHaveLength(200);
    expect(all.at(-1)?.line).toBe(200);
  });
});

describe('quoteMatches', () => {
  it('equal after trimming and whitespace collapse, or a substring of ≥ 8 chars', () => {
    expect(quoteMatches('  return listen(8080);', 'return   listen(8080);')).toBe(true);
    expect(quoteMatches('listen(8080)', '  return   listen(8080);')).toBe(true);
    expect(quoteMatches('listen', '  return   listen(8080);')).toBe(false);
    expect(quoteMatches('}', '}')).toBe(true);
    expect(quoteMatches('', '')).toBe(false);
  });
});

describe('checkCitations over a temp repository', () => {
  it('verifies, detects mismatches, missing lines and files', async () => {
    const text = [
      '- `src/app.ts:3`',
      '  > `export function start() {`',
      '- `src/app.ts:4`',
      '  > return listen(8080);',
      '- `src/app.ts:1`',
      '  > `export default something`',
      '- `src/app.ts:5`',
      '- `src/app.ts:99`',
      '- `src/app.ts:0`',
      '- `src/app.ts:4-2`',
      '- `src/app.ts:3-6`',
      '- `src/nope.ts:1`',
      '- `src:1`',
      '- `README.md:2`',
      '  > `line two`',
      '- `/repo/src/app.ts#L3-L4`',
      '  > `export function start() {`',
      '  > `return listen(8080);`',
    ].join('\n');
    const checks = await checkCitations(repo, text);
    expect(checks.map((c) => [c.citation, c.status])).toEqual([
      ['src/app.ts:3', 'verified'],
      ['src/app.ts:4', 'verified'],
      ['src/app.ts:1', 'quote_mismatch'],
      ['src/app.ts:5', 'unquoted_verified_line'],
      ['src/app.ts:99', 'missing_line'],
      ['src/app.ts:0', 'missing_line'],
      ['src/app.ts:4-2', 'missing_line'],
      ['src/app.ts:3-6', 'missing_line'],
      ['src/nope.ts:1', 'missing_file'],
      ['src:1', 'missing_file'],
      ['README.md:2', 'verified'],
      ['/repo/src/app.ts#L3-L4', 'verified'],
    ]);
    expect(checks[2]).toMatchObject({ quoted: 'export default something', actual: 'import x from "y";' });
    expect(checks[3]).toEqual({ citation: 'src/app.ts:5', path: 'src/app.ts', line: 5, status: 'unquoted_verified_line', actual: '}' });
    expect(checks[4]?.actual).toBeUndefined();
  });

  it('reports outside_repo for ../ escapes, absolute paths and symlink escapes, never reading them', async () => {
    const text = [
      '- `../secret.txt:1`',
      '  > `TOP SECRET`',
      '- `src/../../secret.txt:1`',
      '- `/etc/passwd:1`',
      '- `escape.txt:1`',
      '  > `TOP SECRET`',
      '- `updir/secret.txt:1`',
      '- `inner-link.ts:3`',
    ].join('\n');
    const checks = await checkCitations(repo, text);
    expect(checks.map((c) => c.status)).toEqual(['outside_repo', 'outside_repo', 'outside_repo', 'outside_repo', 'outside_repo', 'unquoted_verified_line']);
    for (const c of checks.slice(0, 5)) expect(c.actual).toBeUndefined();
  });

  it('cannot tell outside files that exist from those that do not: both are outside_repo through a link that leaves (the sandbox tools\' rule)', async () => {
    await symlink(path.join(path.dirname(repo), 'no-such-file.txt'), path.join(repo, 'dangling.txt'));
    const checks = await checkCitations(repo, '`updir/secret.txt:1` `updir/no-such-file.txt:1` `dangling.txt:1`');
    expect(checks.map((c) => c.status)).toEqual(['outside_repo', 'outside_repo', 'missing_file']);
  });

  it('treats binary files, files over 2 MiB, directories and FIFOs as missing_file', async () => {
    const checks = await checkCitations(repo, '`binary.bin:1` `big.txt:1` `src:1` `pipe:1`');
    expect(checks.map((c) => c.status)).toEqual(['missing_file', 'missing_file', 'missing_file', 'missing_file']);
  });

  it('works when the repo path itself is reached through a symlink', async () => {
    const link = path.join(base, 'repo-link');
    await symlink(repo, link);
    const [check] = await checkCitations(link, '`src/app.ts:3`\n> `export function start() {`');
    expect(check?.status).toBe('verified');
  });

  it('summarizeChecks counts per status', async () => {
    const checks = await checkCitations(repo, '`src/app.ts:3`\n`src/app.ts:99`\n`src/app.ts:98`\n`../x:1`');
    const summary = summarizeChecks(checks);
    expect(summary.total).toBe(4);
    expect(summary.unquoted_verified_line).toBe(1);
    expect(summary.missing_line).toBe(2);
    expect(summary.outside_repo).toBe(1);
    expect(summary.verified).toBe(0);
    expect(summary.missing_file).toBe(0);
  });
});

describe('URL citations', () => {
  const fetched = [
    { url: 'https://example.com/docs', content: '# Docs\n\nThe   retry limit is\nfive attempts per hour.\n' },
    { url: 'https://example.org/', content: 'Other page' },
  ];

  it('extracts bare, angle-bracketed, linked and backticked URLs with their quotes', () => {
    const text = [
      'See https://example.com/docs.',
      '> The retry limit is five attempts',
      'Also <https://example.org/> and [link](https://example.net/a?b=1) and `https://example.com/docs#frag`',
    ].join('\n');
    expect(extractUrlCitations(text)).toEqual([
      { url: 'https://example.com/docs', quoted: 'The retry limit is five attempts' },
      { url: 'https://example.org/' },
      { url: 'https://example.net/a?b=1' },
      { url: 'https://example.com/docs#frag' },
    ]);
    expect(extractUrlCitations('(see https://en.wikipedia.org/wiki/Foo_(bar)), and [x](https://a.test/p).')).toEqual([
      { url: 'https://en.wikipedia.org/wiki/Foo_(bar)' },
      { url: 'https://a.test/p' },
    ]);
  });

  it('checks quotes against the fetched content of that URL', () => {
    const text = [
      '- https://example.com/docs',
      '  > `The retry limit is five attempts per hour.`',
      '- https://example.com/docs',
      '  > The retry limit is ten attempts',
      '- https://example.org',
      '- https://not-fetched.example/x',
      '  > anything at all here',
      '- https://EXAMPLE.com/docs#section',
      '  > retry limit is',
      '- https://example.org/',
      '  > Other',
    ].join('\n');
    const checks = checkUrlCitations(text, fetched);
    expect(checks).toEqual([
      { url: 'https://example.com/docs', status: 'verified', quoted: 'The retry limit is five attempts per hour.' },
      { url: 'https://example.com/docs', status: 'quote_not_found', quoted: 'The retry limit is ten attempts' },
      { url: 'https://example.org', status: 'unquoted' },
      { url: 'https://not-fetched.example/x', status: 'not_fetched', quoted: 'anything at all here' },
      { url: 'https://EXAMPLE.com/docs#section', status: 'verified', quoted: 'retry limit is' },
      { url: 'https://example.org/', status: 'unquoted', quoted: 'Other' },
    ]);
    const summary = summarizeChecks(checks);
    expect(summary).toMatchObject({ total: 6, verified: 2, quote_not_found: 1, unquoted: 2, not_fetched: 1 });
  });

  it('an empty list summarises to zeros', () => {
    expect(summarizeChecks([])).toMatchObject({ total: 0, verified: 0, missing_file: 0, not_fetched: 0 });
  });
});

describe('checkCitations with worldReadableOnly (a root daemon reads only what the sandbox uid could)', () => {
  it('treats a 0600 file or a file under a 0700 directory as missing', async () => {
    const { mkdtempSync, writeFileSync, mkdirSync, chmodSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const repo = mkdtempSync(join(tmpdir(), 'fusion-cite-perm-'));
    chmodSync(repo, 0o755);
    writeFileSync(join(repo, 'open.txt'), 'visible line\n', { mode: 0o644 });
    writeFileSync(join(repo, '.env'), 'SECRET=1\n', { mode: 0o600 });
    mkdirSync(join(repo, 'private'), { mode: 0o700 });
    writeFileSync(join(repo, 'private', 'key.txt'), 'key line\n', { mode: 0o644 });
    const text = '- `open.txt:1`\n  > `visible line`\n- `.env:1`\n  > `SECRET=1`\n- `private/key.txt:1`\n  > `key line`\n';
    const strict = await checkCitations(repo, text, { worldReadableOnly: true });
    expect(strict.map((c) => c.status)).toEqual(['verified', 'missing_file', 'missing_file']);
    // Nothing of the unreadable files' content is reported back.
    expect(strict[1]!.actual).toBeUndefined();
    expect(strict[2]!.actual).toBeUndefined();
    const loose = await checkCitations(repo, text);
    expect(loose.map((c) => c.status)).toEqual(['verified', 'verified', 'verified']);
  });
});
