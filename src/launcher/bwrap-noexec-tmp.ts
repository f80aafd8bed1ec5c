/**
 * A `noexec` /tmp for bwrap sandboxes under a root daemon. bwrap's own `--tmpfs` cannot take mount
 * flags, but a bind mount keeps the flags of its source (and a user namespace cannot clear
 * them), so a root daemon mounts a size-capped `noexec,nosuid,nodev` tmpfs per sandbox on the
 * host, owned by the sandbox uid and 0700, and bwrap binds it at /tmp. As a fresh filesystem its
 * root shows as `/` in the child's mountinfo, not as a host path. A non-root daemon cannot mount
 * and keeps bwrap's exec-able tmpfs (docs/security.md#isolation-tiers).
 *
 * The mount point is named after the daemon's pid, so a later daemon removes what a killed one
 * left (`sweepNoexecTmps`).
 */
import { execFile } from 'node:child_process';
import { lstat, mkdir, readdir, rmdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const PREFIX = 'fusion-tmp-';

export interface NoexecTmp {
  dir: string;
  release(): Promise<void>;
}

async function unmount(dir: string): Promise<void> {
  await run('/usr/bin/umount', ['-l', dir]).catch(() => undefined);
  await rmdir(dir).catch(() => undefined);
}

/** Mounts a fresh tmpfs for one sandbox's /tmp. */
export async function mountNoexecTmp(name: string, sizeBytes: number, uid: number, gid: number, root: string = tmpdir()): Promise<NoexecTmp> {
  const dir = join(root, `${PREFIX}${process.pid}-${name}`);
  await mkdir(dir, { mode: 0o700 });
  try {
    await run('/usr/bin/mount', ['-t', 'tmpfs', '-o', `size=${sizeBytes},mode=0700,uid=${uid},gid=${gid},noexec,nosuid,nodev`, 'tmpfs', dir]);
  } catch (err) {
    await rmdir(dir).catch(() => undefined);
    throw err;
  }
  return { dir, release: () => unmount(dir) };
}

/**
 * Unmounts the /tmp mounts of daemons that are gone. The root is world-writable (/tmp): only a
 * real directory owned by this daemon's uid is one of ours — any user can plant a symbolic link
 * under our name, and umount(8) would follow it to unmount the host mount it names. A directory
 * we own in a sticky /tmp cannot be swapped by anyone else after the check.
 */
export async function sweepNoexecTmps(root: string = tmpdir()): Promise<void> {
  const names = await readdir(root).catch(() => [] as string[]);
  for (const name of names) {
    const pid = /^fusion-tmp-(\d+)-/.exec(name)?.[1];
    if (pid === undefined || Number(pid) === process.pid) continue;
    let alive = true;
    try {
      process.kill(Number(pid), 0);
    } catch (err) {
      alive = (err as NodeJS.ErrnoException).code === 'EPERM';
    }
    if (alive) continue;
    const dir = join(root, name);
    const info = await lstat(dir).catch(() => null);
    if (info === null || !info.isDirectory() || info.uid !== (process.getuid?.() ?? 0)) continue;
    await unmount(dir);
  }
}
