/**
 * How much an attempt's /out holds, counted over the whole tree: every entry at any depth
 * (files, directories, links, anything) counts as one file, and every entry's size counts as
 * bytes (a sparse file counts at its apparent size: the cap is about what the collector and the
 * host disk may be asked to hold). The walk stops as soon as a cap is exceeded, so a directory
 * with a million entries costs no more than the cap's worth of work.
 */
import { lstat, opendir } from 'node:fs/promises';
import { join } from 'node:path';

/** An attempt's /out may hold at most this much while it runs. */
export const MAX_OUT_FILES = 64;
export const MAX_OUT_BYTES = 96 * 1024 * 1024;

export interface OutDirCaps {
  maxFiles?: number | undefined;
  maxBytes?: number | undefined;
}

/** Why `dir` holds more than its caps, or null when it does not (or is gone: the attempt is over). */
export async function outDirOverflow(dir: string, caps: OutDirCaps = {}): Promise<string | null> {
  const maxFiles = caps.maxFiles ?? MAX_OUT_FILES;
  const maxBytes = caps.maxBytes ?? MAX_OUT_BYTES;
  let files = 0;
  let bytes = 0;
  const pending = [dir];
  while (pending.length > 0) {
    const current = pending.pop() as string;
    let handle;
    try {
      handle = await opendir(current);
    } catch {
      continue; // removed meanwhile, or not a directory any more
    }
    try {
      for await (const entry of handle) {
        files += 1;
        if (files > maxFiles) return `more than ${maxFiles} files in /out`;
        const path = join(current, entry.name);
        // lstat: a link is never followed out of /out; a directory is walked, not trusted by name.
        const info = await lstat(path).catch(() => null);
        if (info === null) continue;
        bytes += info.size;
        if (bytes > maxBytes) return `more than ${maxBytes} bytes in /out`;
        if (info.isDirectory()) pending.push(path);
      }
    } catch {
      // the directory vanished during the walk
    }
  }
  return null;
}
