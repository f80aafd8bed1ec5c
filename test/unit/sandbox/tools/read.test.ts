import { symlink } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readTool } from '../../../../sandbox/tools/read.js';
import { errorText, FIXTURE_REPO, makeTempRepo, okText, removeTempRepo } from './helpers.js';

let tmp: string;
const numbered = (n: number): string => Array.from({ length: n }, (_, i) => `line ${i + 1}`).join('\n') + '\n';

beforeAll(async () => {
  tmp = await makeTempRepo({
    'long.txt': numbered(1000),
    'big-lines.txt': Array.from({ length: 200 }, (_, i) => `${i + 1} ${'x'.repeat(1000)}`).join('\n'),
    'one-huge-line.txt': 'y'.repeat(200_000),
    'empty.txt': '',
    'no-newline.txt': 'a\nb',
    'late-nul.txt': 'a'.repeat(9000) + '\0tail\n',
    'utf8.txt': 'héllo wörld 😀\n',
  });
  await symlink('/etc/passwd', path.join(tmp, 'host-link'));
});

afterAll(async () => {
  await removeTempRepo(tmp);
});

describe('read', () => {
  it('numbers lines like cat -n with a tab', async () => {
    const text = okText(await readTool(FIXTURE_REPO, { path: 'src/util/math.ts' }));
    expect(text.split('\n').slice(0, 3)).toEqual(['1\t/** Adds two numbers. */', '2\texport function add(a: number, b: number): number {', '3\t  return a + b;']);
    expect(text.split('\n')).toHaveLength(9);
    expect(text).not.toContain('[');
  });

  it('strips CR from CRLF files', async () => {
    expect(okText(await readTool(FIXTURE_REPO, { path: 'docs/notes.txt' }))).toBe('1\tcrlf line one\n2\tcrlf line two');
  });

  it('accepts absolute paths inside the root', async () => {
    const text = okText(await readTool(FIXTURE_REPO, { path: path.join(FIXTURE_REPO, 'config.json') }));
    expect(text).toBe('1\t{ "name": "tools-repo", "debug": false }');
  });

  it('pages with offset and limit and says where to continue', async () => {
    const first = okText(await readTool(tmp, { path: 'long.txt' }));
    const lines = first.split('\n');
    expect(lines).toHaveLength(401);
    expect(lines[399]).toBe('400\tline 400');
    expect(lines[400]).toBe('[showing lines 1-400 of 1000; continue with offset=401]');

    const page = okText(await readTool(tmp, { path: 'long.txt', offset: 990, limit: 5 }));
    expect(page).toBe('990\tline 990\n991\tline 991\n992\tline 992\n993\tline 993\n994\tline 994\n[showing lines 990-994 of 1000; continue with offset=995]');

    const tail = okText(await readTool(tmp, { path: 'long.txt', offset: 999 }));
    expect(tail).toBe('999\tline 999\n1000\tline 1000');
  });

  it('reports an offset past the end', async () => {
    expect(okText(await readTool(tmp, { path: 'long.txt', offset: 5000 }))).toBe('[offset 5000 is past the end of the file (1000 lines)]');
  });

  it('handles empty files and a missing final newline', async () => {
    expect(okText(await readTool(tmp, { path: 'empty.txt' }))).toBe('[empty file]');
    expect(okText(await readTool(tmp, { path: 'no-newline.txt' }))).toBe('1\ta\n2\tb');
  });

  it('caps output bytes with an explicit truncation note', async () => {
    const text = okText(await readTool(tmp, { path: 'big-lines.txt', limit: 2000 }));
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(64 * 1024);
    const last = text.split('\n').at(-1) as string;
    expect(last).toMatch(/^\[truncated: output reached the 65536-byte cap after line (\d+); continue with offset=\d+\]$/);
    const shown = Number(/after line (\d+)/.exec(last)?.[1]);
    expect(text.split('\n').at(-2)?.startsWith(`${shown}\t${shown} `)).toBe(true);

    const small = okText(await readTool(tmp, { path: 'big-lines.txt' }, { maxOutputBytes: 4096 }));
    expect(Buffer.byteLength(small)).toBeLessThanOrEqual(4096);
    expect(small).toMatch(/\[truncated: .*continue with offset=\d+\]$/);
  });

  it('shows the head of a single line longer than the cap', async () => {
    const text = okText(await readTool(tmp, { path: 'one-huge-line.txt' }));
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(64 * 1024);
    expect(text.startsWith('1\tyyyy')).toBe(true);
    expect(text).toMatch(/\[truncated: line 1 is longer than the 65536-byte output cap and was cut\]$/);
  });

  it('decodes UTF-8', async () => {
    expect(okText(await readTool(tmp, { path: 'utf8.txt' }))).toBe('1\théllo wörld 😀');
  });

  it('refuses binary files and directories', async () => {
    expect(errorText(await readTool(FIXTURE_REPO, { path: 'assets/logo.bin' }))).toBe(
      'read: assets/logo.bin appears to be a binary file (NUL byte in the first 8 KiB)',
    );
    expect(errorText(await readTool(FIXTURE_REPO, { path: 'src' }))).toBe('read: src is a directory; use ls to list it');
    // A NUL after the first 8 KiB does not make the file binary.
    expect(okText(await readTool(tmp, { path: 'late-nul.txt' }))).toContain('1\taaaa');
  });

  it('refuses paths outside the repository', async () => {
    expect(errorText(await readTool(tmp, { path: '/etc/passwd' }))).toBe('read: absolute path is outside the repository');
    expect(errorText(await readTool(tmp, { path: '../x' }))).toMatch(/^read: path escapes the repository/);
    expect(errorText(await readTool(tmp, { path: 'host-link' }))).toBe('read: path resolves outside the repository: host-link');
    expect(errorText(await readTool(tmp, { path: 'nope.txt' }))).toBe('read: path not found: nope.txt');
  });

  it('validates arguments strictly', async () => {
    expect(errorText(await readTool(tmp, null))).toBe('read arguments must be an object');
    expect(errorText(await readTool(tmp, []))).toBe('read arguments must be an object');
    expect(errorText(await readTool(tmp, { path: 'a', lines: 3, x: 1 }))).toBe('read contains unsupported key(s): lines, x');
    expect(errorText(await readTool(tmp, {}))).toBe('read missing required key(s): path');
    expect(errorText(await readTool(tmp, { path: 7 }))).toBe('read.path must be a string');
    expect(errorText(await readTool(tmp, { path: '  ' }))).toBe('read.path must not be blank');
    expect(errorText(await readTool(tmp, { path: 'long.txt', offset: 0 }))).toBe(
      `read.offset must be an integer between 1 and ${Number.MAX_SAFE_INTEGER}`,
    );
    expect(errorText(await readTool(tmp, { path: 'long.txt', limit: 2001 }))).toBe('read.limit must be an integer between 1 and 2000');
    expect(errorText(await readTool(tmp, { path: 'long.txt', limit: 1.5 }))).toBe('read.limit must be an integer between 1 and 2000');
    expect(errorText(await readTool(tmp, { path: 'long.txt', limit: '5' }))).toBe('read.limit must be an integer between 1 and 2000');
    // null means "not provided" for optional fields.
    expect(okText(await readTool(tmp, { path: 'no-newline.txt', offset: null, limit: null }))).toBe('1\ta\n2\tb');
  });
});
