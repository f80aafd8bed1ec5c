import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PathConfineError, resolveInRepo } from '../../../../sandbox/path-confine.js';
import { makeTempRepo, removeTempRepo } from './helpers.js';

let repo: string;
let outside: string;

async function reject(userPath: string): Promise<PathConfineError> {
  try {
    await resolveInRepo(repo, userPath);
  } catch (err) {
    expect(err).toBeInstanceOf(PathConfineError);
    return err as PathConfineError;
  }
  throw new Error(`expected ${JSON.stringify(userPath)} to be rejected`);
}

beforeAll(async () => {
  repo = await makeTempRepo({ 'src/a.ts': 'export const a = 1;\n', 'README.md': '# hi\n' });
  // A sibling directory outside the repo, reachable only through symlinks.
  outside = path.join(path.dirname(repo), 'outside');
  await mkdir(outside);
  await writeFile(path.join(outside, 'secret.txt'), 'secret\n');
  await symlink('/etc', path.join(repo, 'etc-link'));
  await symlink(outside, path.join(repo, 'out-dir'));
  await symlink(path.join(outside, 'secret.txt'), path.join(repo, 'secret-link'));
  await symlink('src', path.join(repo, 'src-link'));
  await symlink('src/a.ts', path.join(repo, 'a-link.ts'));
  await symlink(path.join(outside, 'missing.txt'), path.join(repo, 'dangling-out'));
  await symlink('nope.txt', path.join(repo, 'dangling-in'));
  await mkdir(path.join(repo, 'deep'));
  await symlink('../../outside', path.join(repo, 'deep', 'up'));
});

afterAll(async () => {
  await removeTempRepo(repo);
});

describe('resolveInRepo', () => {
  it('accepts relative paths and returns the real path and display path', async () => {
    const r = await resolveInRepo(repo, 'src/a.ts');
    expect(r.displayPath).toBe('src/a.ts');
    expect(r.realPath.endsWith(path.join('repo', 'src', 'a.ts'))).toBe(true);
  });

  it('maps the root to "."', async () => {
    for (const p of ['.', './', '', 'src/..']) expect((await resolveInRepo(repo, p)).displayPath).toBe('.');
  });

  it('accepts absolute paths inside the root', async () => {
    const r = await resolveInRepo(repo, path.join(repo, 'src', 'a.ts'));
    expect(r.displayPath).toBe('src/a.ts');
  });

  it('normalises inner ".." that stays inside', async () => {
    expect((await resolveInRepo(repo, 'src/../README.md')).displayPath).toBe('README.md');
    expect((await resolveInRepo(repo, './src//a.ts')).displayPath).toBe('src/a.ts');
  });

  it('rejects ".." escapes', async () => {
    for (const p of ['..', '../x', 'src/../../x', '../repo/src/a.ts']) {
      const err = await reject(p);
      expect(err.reason).toBe('outside');
      expect(err.message).toMatch(/escapes the repository/);
    }
  });

  it('rejects absolute paths outside without echoing them', async () => {
    const err = await reject('/etc/passwd');
    expect(err.reason).toBe('outside');
    expect(err.message).toBe('absolute path is outside the repository');
    const sibling = await reject(path.join(outside, 'secret.txt'));
    expect(sibling.message).not.toContain(outside);
  });

  it('rejects a prefix-sharing sibling (repo2 is not inside repo)', async () => {
    const err = await reject(`${repo}2/x`);
    expect(err.reason).toBe('outside');
  });

  it('rejects NUL bytes', async () => {
    const err = await reject('src/a.ts\0.png');
    expect(err.reason).toBe('invalid');
    expect(err.message).toMatch(/NUL/);
  });

  it('rejects a symlink to /etc and anything below it', async () => {
    for (const p of ['etc-link', 'etc-link/passwd', 'etc-link/hostname']) {
      const err = await reject(p);
      expect(err.reason).toBe('outside');
      expect(err.message).not.toContain('/etc');
    }
  });

  it('rejects paths through a symlinked intermediate directory leaving the root', async () => {
    for (const p of ['out-dir/secret.txt', 'deep/up/secret.txt', 'secret-link']) {
      const err = await reject(p);
      expect(err.reason).toBe('outside');
      expect(err.message).toContain(p);
      expect(err.message).not.toContain(outside);
    }
  });

  it('does not reveal whether a file exists outside (same error for missing targets)', async () => {
    const missing = await reject('out-dir/does-not-exist.txt');
    expect(missing.reason).toBe('outside');
    const dangling = await reject('dangling-out');
    const danglingIn = await reject('dangling-in');
    expect(dangling.reason).toBe(danglingIn.reason);
    expect(dangling.message.replace('dangling-out', 'X')).toBe(danglingIn.message.replace('dangling-in', 'X'));
  });

  it('follows symlinks that stay inside the root', async () => {
    const viaDir = await resolveInRepo(repo, 'src-link/a.ts');
    expect(viaDir.displayPath).toBe('src-link/a.ts');
    expect(viaDir.realPath).toBe((await resolveInRepo(repo, 'src/a.ts')).realPath);
    const viaFile = await resolveInRepo(repo, 'a-link.ts');
    expect(viaFile.realPath).toBe(viaDir.realPath);
  });

  it('reports missing paths with the repo-relative form only', async () => {
    const err = await reject('src/missing.ts');
    expect(err.reason).toBe('not_found');
    expect(err.message).toBe('path not found: src/missing.ts');
    const notDir = await reject('README.md/x');
    expect(notDir.reason).toBe('not_found');
  });

  it('works when the root itself is reached through a symlink', async () => {
    const alias = path.join(path.dirname(repo), 'alias');
    await symlink(repo, alias);
    expect((await resolveInRepo(alias, 'src/a.ts')).displayPath).toBe('src/a.ts');
    expect((await resolveInRepo(alias, path.join(alias, 'README.md'))).displayPath).toBe('README.md');
    expect((await resolveInRepo(alias, path.join(repo, 'README.md'))).displayPath).toBe('README.md');
  });
});
