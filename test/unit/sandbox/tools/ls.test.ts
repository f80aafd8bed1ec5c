import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lsTool } from '../../../../sandbox/tools/ls.js';
import { errorText, FIXTURE_REPO, makeTempRepo, okText, removeTempRepo } from './helpers.js';

let tmp: string;

beforeAll(async () => {
  tmp = await makeTempRepo({ 'b.txt': '', 'a/x.txt': '', '.hidden': '', 'node_modules/dep/i.js': '', 'c@': '' });
  await symlink('/etc', path.join(tmp, 'etc-link'));
  await symlink('a', path.join(tmp, 'a-link'));
  const many = path.join(tmp, 'many');
  await mkdir(many);
  for (let i = 0; i < 1005; i += 1) await writeFile(path.join(many, `f${String(i).padStart(4, '0')}`), '');
});

afterAll(async () => {
  await removeTempRepo(tmp);
});

describe('ls', () => {
  it('lists the root sorted, dirs with /', async () => {
    expect(okText(await lsTool(FIXTURE_REPO, {}))).toBe('README.md\nassets/\nconfig.json\ndocs/\nsrc/');
    expect(okText(await lsTool(FIXTURE_REPO, { path: 'src' }))).toBe('index.test.ts\nindex.ts\nutil/');
    expect(okText(await lsTool(FIXTURE_REPO, { path: null }))).toBe('README.md\nassets/\nconfig.json\ndocs/\nsrc/');
  });

  it('shows symlinks with @ without following them, and hidden entries', async () => {
    expect(okText(await lsTool(tmp, {}))).toBe('.hidden\na/\na-link@\nb.txt\nc@\netc-link@\nmany/\nnode_modules/');
  });

  it('caps at 1000 entries', async () => {
    const text = okText(await lsTool(tmp, { path: 'many' }));
    const lines = text.split('\n');
    expect(lines).toHaveLength(1001);
    expect(lines[999]).toBe('f0999');
    expect(lines[1000]).toBe('[showing the first 1000 of 1005 entries]');
  });

  it('reports empty directories', async () => {
    await mkdir(path.join(tmp, 'empty'));
    expect(okText(await lsTool(tmp, { path: 'empty' }))).toBe('[empty directory]');
  });

  it('refuses files, escapes and bad arguments', async () => {
    expect(errorText(await lsTool(tmp, { path: 'b.txt' }))).toBe('ls: b.txt is not a directory; use read to view a file');
    expect(errorText(await lsTool(tmp, { path: 'etc-link' }))).toBe('ls: path resolves outside the repository: etc-link');
    expect(errorText(await lsTool(tmp, { path: '..' }))).toBe('ls: path escapes the repository: ".."');
    expect(errorText(await lsTool(tmp, { path: '/' }))).toBe('ls: absolute path is outside the repository');
    expect(errorText(await lsTool(tmp, { dir: 'a' }))).toBe('ls contains unsupported key(s): dir');
    expect(errorText(await lsTool(tmp, 'a'))).toBe('ls arguments must be an object');
  });
});
