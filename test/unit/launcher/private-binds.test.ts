/**
 * The private-bind step (docs/security.md#private-repos): root binds the repository through a
 * descriptor that must still name the physical path the task recorded, so a path swapped for a
 * symlink after the submit-time check stops the launch (exit 97) instead of binding another
 * directory. Needs root (mount); skips loudly elsewhere, never under CI=true.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { privateBinds, REPO_CHANGED_EXIT } from '../../../src/launcher/private-binds.js';

const IS_ROOT = process.getuid?.() === 0;
const suite = IS_ROOT || process.env.CI === 'true' ? describe : describe.skip;
if (!IS_ROOT && process.env.CI !== 'true') process.stderr.write('\n*** SKIPPED private-binds.test.ts: it needs root (mount). ***\n\n');

const base = mkdtempSync(join(tmpdir(), 'fusion-pbind-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));

suite('privateBinds', () => {
  // A repository under a 0700 parent: the attempt uid could never traverse to it by path.
  const parent = join(base, 'home');
  const repo = join(parent, 'repo');
  mkdirSync(repo, { recursive: true });
  writeFileSync(join(repo, 'file.txt'), 'hello\n');
  chmodSync(repo, 0o755);
  chmodSync(join(repo, 'file.txt'), 0o644);
  chmodSync(parent, 0o700);
  const link = join(base, 'link');
  symlinkSync(repo, link);
  const ids = { uid: 65534, gid: 65534 };

  it('binds the physical path onto a mount point the attempt uid reads', async () => {
    const binds = privateBinds({ repoDir: repo, tmpfsBytes: 1 << 20 }, ids);
    try {
      const r = spawnSync(binds.prefix[0]!, [...binds.prefix.slice(1), '/bin/cat', join(binds.repoDir!, 'file.txt')], { encoding: 'utf8' });
      expect({ status: r.status, stdout: r.stdout, stderr: r.stderr }).toEqual({ status: 0, stdout: 'hello\n', stderr: '' });
    } finally {
      // nothing to clean: the mount points are fixed and the mounts died with the namespace
    }
  });

  it('refuses a path that no longer names the checked directory (a symlink swapped in)', async () => {
    const binds = privateBinds({ repoDir: link, tmpfsBytes: 1 << 20 }, ids);
    try {
      const r = spawnSync(binds.prefix[0]!, [...binds.prefix.slice(1), '/bin/true'], { encoding: 'utf8' });
      expect(r.status).toBe(REPO_CHANGED_EXIT);
      expect(r.stderr).toContain(`the repository path ${link} changed since it was checked`);
      // Nothing was mounted on the host.
      expect(execFileSync('cat', ['/proc/self/mountinfo'], { encoding: 'utf8' })).not.toContain(binds.repoDir!);
    } finally {
      // nothing to clean: the mount points are fixed and the mounts died with the namespace
    }
  });
});
