/**
 * A sandbox's `/out` on a file system of its own whose size the kernel enforces
 * (docs/security.md#threat-child): a tmpfs with `size=` and `nr_inodes=` set from the /out caps,
 * `noexec,nosuid,nodev`, owned by the sandbox uid and 0700. A write beyond the cap fails with
 * `ENOSPC` inside the sandbox, so no byte beyond it ever reaches the host disk — whatever the
 * child does (a nested path, one quick burst, a file it opened and then unlinked: its blocks stay
 * counted until the descriptor closes).
 *
 * The tmpfs holds one page and one entry more than the caps, so a child that tries to go beyond
 * them leaves a trace the supervision sees (`outMountOverflow`) and stops the sandbox with
 * `output_cap` (exit 125 in `fusion sandbox exec`); exactly the caps stay allowed. Bytes are the
 * file system's own count: whole pages, which is what the host would have to hold.
 *
 * After the sandbox is gone the launcher copies the tree into the attempt's host `outDir`
 * (`copyOutTree`: regular files and directories only, through `O_NOFOLLOW` descriptors, never
 * more than the caps) and lets the tmpfs go. tmpfs pages are charged to the memory cgroup of the
 * process that writes them, so a sandbox's /out also counts against its memory cap.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { constants as fsConstants, lstatSync, mkdirSync } from 'node:fs';
import { lstat, mkdir, open, opendir, rmdir, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { FusionError } from '../errors.js';
import { MAX_OUT_BYTES, MAX_OUT_FILES, type OutDirCaps } from './out-dir-usage.js';
import { startTime } from './uid-pool.js';

const run = promisify(execFile);
/** tmpfs counts in pages; the one page beyond the cap is the overflow's trace. */
export const OUT_PAGE_BYTES = 4096;

function capsOf(caps: OutDirCaps): { maxFiles: number; maxBytes: number } {
  return { maxFiles: caps.maxFiles ?? MAX_OUT_FILES, maxBytes: caps.maxBytes ?? MAX_OUT_BYTES };
}

/** The tmpfs options of one sandbox's /out (mount(8) `-o` syntax). */
export function outMountOptions(caps: OutDirCaps, uid: number, gid: number): string {
  const { maxFiles, maxBytes } = capsOf(caps);
  const pages = Math.ceil(maxBytes / OUT_PAGE_BYTES) + 1;
  // nr_inodes counts the root directory too: root + the allowed entries + one to see an overflow.
  return `size=${pages * OUT_PAGE_BYTES},nr_inodes=${maxFiles + 2},mode=0700,uid=${uid},gid=${gid},noexec,nosuid,nodev`;
}

/**
 * Why the /out tmpfs at `dir` holds more than its caps, or null. One statfs: cheap enough to ask
 * often, and it sees what a tree walk cannot (files opened and unlinked).
 */
export async function outMountOverflow(dir: string, caps: OutDirCaps): Promise<string | null> {
  const { maxFiles, maxBytes } = capsOf(caps);
  const fs = await statfs(dir);
  const usedBytes = (fs.blocks - fs.bfree) * fs.bsize;
  if (usedBytes > maxBytes) return `more than ${maxBytes} bytes in /out`;
  const entries = fs.files - fs.ffree - 1; // the root directory is no entry
  if (entries > maxFiles) return `more than ${maxFiles} files in /out`;
  return null;
}

/**
 * Copies what a finished sandbox left in its /out tmpfs (`from`) into the host directory `to`:
 * regular files and directories, at most the caps (entries and apparent bytes, so a sparse file
 * cannot grow into a large one on the host); links, FIFOs, sockets and devices are skipped, and
 * nothing is ever followed. Returns how many entries were skipped.
 */
export async function copyOutTree(from: string, to: string, caps: OutDirCaps): Promise<{ copied: number; skipped: number }> {
  const { maxFiles, maxBytes } = capsOf(caps);
  let entries = 0;
  let bytes = 0;
  let skipped = 0;
  let copied = 0;
  const pending: Array<[string, string]> = [[from, to]];
  const buffer = Buffer.allocUnsafe(256 * 1024);
  while (pending.length > 0) {
    const [src, dest] = pending.pop() as [string, string];
    let dir;
    try {
      dir = await opendir(src);
    } catch {
      continue;
    }
    for await (const entry of dir) {
      entries += 1;
      if (entries > maxFiles) {
        skipped += 1;
        continue;
      }
      const source = join(src, entry.name);
      const target = join(dest, entry.name);
      const info = await lstat(source).catch(() => null);
      if (info?.isDirectory()) {
        await mkdir(target, { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'EEXIST') throw err;
        });
        const made = await lstat(target);
        if (!made.isDirectory()) {
          skipped += 1;
          continue;
        }
        pending.push([source, target]);
        continue;
      }
      if (!info?.isFile() || bytes + info.size > maxBytes) {
        skipped += 1;
        continue;
      }
      const input = await open(source, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK).catch(() => null);
      if (input === null) {
        skipped += 1;
        continue;
      }
      try {
        const st = await input.stat();
        if (!st.isFile() || bytes + st.size > maxBytes) {
          skipped += 1;
          continue;
        }
        bytes += st.size;
        const output = await open(target, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC | fsConstants.O_NOFOLLOW, 0o600);
        try {
          let done = 0;
          while (done < st.size) {
            const { bytesRead } = await input.read(buffer, 0, Math.min(buffer.length, st.size - done), done);
            if (bytesRead === 0) break;
            await output.write(buffer, 0, bytesRead);
            done += bytesRead;
          }
        } finally {
          await output.close();
        }
        copied += 1;
      } finally {
        await input.close();
      }
    }
  }
  return { copied, skipped };
}

/**
 * Where a root daemon mounts the host-side /out tmpfs of its Docker and gVisor sandboxes: root's,
 * 0700, shared by every process on the host. Each mount point is named after its process (pid and
 * start time), so any later daemon unmounts what a dead one left (`sandbox-reaper.ts`).
 */
export const HOST_OUT_BASE = '/run/fusion-sandbox-out';

/** The owner part of this process's mount point names: `<pid>.<start time>`. */
export function hostOutOwner(pid: number = process.pid): string {
  return `${pid}.${startTime(pid) ?? '0'}`;
}

/** A fresh mount point name under `base` for this process (the base is made and checked once). */
export function hostOutPath(base: string = HOST_OUT_BASE): string {
  mkdirSync(base, { recursive: true, mode: 0o700 });
  const info = lstatSync(base);
  if (!info.isDirectory() || info.uid !== (process.getuid?.() ?? 0) || (info.mode & 0o077) !== 0) {
    throw new FusionError('launch_failed', `sandbox /out mount directory ${base} must be a directory owned by this daemon's uid with mode 0700; remove it and retry`, { retryable: false });
  }
  return join(base, `${hostOutOwner()}.${randomUUID().slice(0, 12)}`);
}

/** A host-side /out tmpfs (Docker, gVisor: the engine binds a host path). */
export interface HostOutMount {
  dir: string;
  /** Unmounts (lazily: a straggling reader cannot keep it) and removes the mount point. */
  release(): Promise<void>;
}

/** Mounts a fresh capped tmpfs at `dir` (created here, 0700; the tmpfs root then belongs to uid). */
export async function mountHostOut(dir: string, caps: OutDirCaps, uid: number, gid: number): Promise<HostOutMount> {
  await mkdir(dir, { mode: 0o700 });
  try {
    await run('/usr/bin/mount', ['-t', 'tmpfs', '-o', outMountOptions(caps, uid, gid), 'tmpfs', dir]);
  } catch (err) {
    await rmdir(dir).catch(() => undefined);
    throw err;
  }
  return {
    dir,
    release: async () => {
      await run('/usr/bin/umount', ['-l', dir]).catch(() => undefined);
      await rmdir(dir).catch(() => undefined);
    },
  };
}
