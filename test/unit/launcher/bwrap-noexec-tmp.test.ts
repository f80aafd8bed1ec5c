/**
 * The sweep of dead daemons' /tmp mounts (src/launcher/bwrap-noexec-tmp.ts) runs as root over a
 * world-writable directory: anything another local user planted there under the
 * `fusion-tmp-<dead pid>-…` name must be left alone — above all a symbolic link, which
 * umount(8) would follow to unmount whatever host mount it names.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sweepNoexecTmps } from '../../../src/launcher/bwrap-noexec-tmp.js';

const isRoot = process.getuid?.() === 0;
const mounted = (dir: string): boolean => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').some((line) => line.split(' ')[4] === dir);
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const clean of cleanups.splice(0)) clean();
});

// A dead pid: pid_max is at most 2^22, so this one never runs.
const DEAD = 4_194_305;

describe.skipIf(!isRoot && process.env.CI !== 'true')('sweepNoexecTmps', () => {
  it('does not follow a planted symbolic link to unmount a host mount', async () => {
    const root = mkdtempSync(join(tmpdir(), 'fusion-sweep-'));
    const victim = mkdtempSync(join(tmpdir(), 'fusion-victim-'));
    execFileSync('/usr/bin/mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', victim]);
    cleanups.push(() => {
      try {
        execFileSync('/usr/bin/umount', [victim]);
      } catch {
        // already gone (the failing case)
      }
      rmSync(victim, { recursive: true, force: true });
      rmSync(root, { recursive: true, force: true });
    });
    symlinkSync(victim, join(root, `fusion-tmp-${DEAD}-planted`));
    await sweepNoexecTmps(root);
    expect(mounted(victim)).toBe(true);
  });

  it('still unmounts a dead daemon\'s own mount', async () => {
    const root = mkdtempSync(join(tmpdir(), 'fusion-sweep-'));
    const dir = join(root, `fusion-tmp-${DEAD}-left`);
    mkdirSync(dir, { mode: 0o700 });
    execFileSync('/usr/bin/mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir]);
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    await sweepNoexecTmps(root);
    expect(mounted(dir)).toBe(false);
  });
});
