import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findTool } from '../../../../sandbox/tools/find.js';
import { errorText, FIXTURE_REPO, makeTempRepo, okText, removeTempRepo } from './helpers.js';

let tmp: string;

beforeAll(async () => {
  const files: Record<string, string> = {
    'src/a.ts': '',
    'src/a-b.ts': '',
    'src/sub/c.ts': '',
    'node_modules/dep/index.ts': '',
    '.git/HEAD': '',
  };
  for (let i = 0; i < 30; i += 1) files[`gen/f${String(i).padStart(2, '0')}.ts`] = '';
  for (let i = 0; i < 40; i += 1) files[`long/${'n'.repeat(60)}-${i}.txt`] = '';
  tmp = await makeTempRepo(files);
  const outside = path.join(path.dirname(tmp), 'outside');
  await mkdir(outside);
  await writeFile(path.join(outside, 'x.ts'), '');
  await symlink(outside, path.join(tmp, 'out-dir'));
  await symlink(path.join(outside, 'x.ts'), path.join(tmp, 'out-file.ts'));
  await symlink('src/a.ts', path.join(tmp, 'in-file.ts'));
  await symlink('src/sub', path.join(tmp, 'in-dir'));
  await symlink('missing.ts', path.join(tmp, 'dangling.ts'));
});

afterAll(async () => {
  await removeTempRepo(tmp);
});

describe('find', () => {
  it('lists matching repo-relative paths sorted', async () => {
    expect(okText(await findTool(FIXTURE_REPO, { pattern: '*.ts' })).split('\n')).toEqual([
      'src/index.test.ts',
      'src/index.ts',
      'src/util/math.ts',
      'src/util/strings.ts',
    ]);
    expect(okText(await findTool(FIXTURE_REPO, { pattern: 'src/**/*.ts', type: 'file' }))).toBe(
      'src/index.test.ts\nsrc/index.ts\nsrc/util/math.ts\nsrc/util/strings.ts',
    );
    expect(okText(await findTool(FIXTURE_REPO, { pattern: '*.{md,json}' }))).toBe('README.md\nconfig.json\ndocs/guide.md');
  });

  it('suffixes directories with / and filters by type', async () => {
    expect(okText(await findTool(FIXTURE_REPO, { pattern: '**', type: 'dir' }))).toBe('assets/\ndocs/\nsrc/\nsrc/util/');
    expect(okText(await findTool(FIXTURE_REPO, { pattern: 'u*' }))).toBe('src/util/');
  });

  it('matches relative to path or to the root', async () => {
    expect(okText(await findTool(FIXTURE_REPO, { pattern: 'util/*', path: 'src' }))).toBe('src/util/math.ts\nsrc/util/strings.ts');
    expect(okText(await findTool(FIXTURE_REPO, { pattern: 'src/util/s*', path: 'src' }))).toBe('src/util/strings.ts');
    expect(okText(await findTool(FIXTURE_REPO, { pattern: '*.ts', path: 'src/util' }))).toBe('src/util/math.ts\nsrc/util/strings.ts');
  });

  it('sorts by plain string order', async () => {
    expect(okText(await findTool(tmp, { pattern: 'src/*' }))).toBe('src/a-b.ts\nsrc/a.ts\nsrc/sub/');
  });

  it('skips .git and node_modules unless path points inside them', async () => {
    const all = okText(await findTool(tmp, { pattern: '**', max_results: 2000 }));
    expect(all).not.toContain('node_modules');
    expect(all).not.toContain('.git');
    expect(okText(await findTool(tmp, { pattern: '*', path: 'node_modules' }))).toBe('node_modules/dep/\nnode_modules/dep/index.ts');
    expect(okText(await findTool(tmp, { pattern: 'HEAD', path: '.git' }))).toBe('.git/HEAD');
  });

  it('never follows symlinks; lists only those that stay inside', async () => {
    const all = okText(await findTool(tmp, { pattern: '**', max_results: 2000 })).split('\n');
    expect(all).toContain('in-file.ts');
    expect(all).toContain('in-dir/');
    expect(all).not.toContain('in-dir/c.ts');
    expect(all.some((l) => l.startsWith('out-'))).toBe(false);
    expect(all).not.toContain('dangling.ts');
    expect(okText(await findTool(tmp, { pattern: 'in-*', type: 'file' }))).toBe('in-file.ts');
  });

  it('caps results and says so', async () => {
    const text = okText(await findTool(tmp, { pattern: 'f*.ts', max_results: 5 }));
    expect(text).toBe(
      'gen/f00.ts\ngen/f01.ts\ngen/f02.ts\ngen/f03.ts\ngen/f04.ts\n' +
        '[result limit reached: showing the first 5 results; narrow the pattern or path, or raise max_results]',
    );
    const bytes = okText(await findTool(tmp, { pattern: 'long/*' }, { maxOutputBytes: 1024 }));
    expect(Buffer.byteLength(bytes)).toBeLessThanOrEqual(1024);
    expect(bytes).toMatch(/\[truncated: output reached the 1024-byte cap after \d+ results\]$/);
  });

  it('reports an early stop when the walk budget is used up', async () => {
    const text = okText(await findTool(tmp, { pattern: '*.ts' }, { maxWalkEntries: 3 }));
    expect(text).toMatch(/\[search stopped early: visited 3 directory entries\]$/);
  });

  it('reports no matches and rejects bad arguments', async () => {
    expect(okText(await findTool(FIXTURE_REPO, { pattern: '*.rs' }))).toBe('[no matches]');
    expect(errorText(await findTool(FIXTURE_REPO, { pattern: '*.ts', type: 'link' }))).toBe('find.type must be one of: file, dir');
    expect(errorText(await findTool(FIXTURE_REPO, { pattern: '*.ts', max_results: 0 }))).toBe('find.max_results must be an integer between 1 and 2000');
    expect(errorText(await findTool(FIXTURE_REPO, { glob: '*.ts' }))).toBe('find contains unsupported key(s): glob');
    expect(errorText(await findTool(FIXTURE_REPO, { pattern: '*.ts', path: 'README.md' }))).toBe('find: README.md is not a directory');
    expect(errorText(await findTool(tmp, { pattern: '*', path: 'out-dir' }))).toBe('find: path resolves outside the repository: out-dir');
  });
});
