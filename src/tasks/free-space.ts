/**
 * Full disk is a state, not a bug (docs/behaviour.md#b13-storage): a submit is refused with `storage_full` while the
 * data directory's filesystem has less free space than the configured reserve, so no receipt is
 * issued for a task whose records could not be written.
 */
import { statfsSync } from 'node:fs';
import { FusionError } from '../errors.js';

/** Bytes an unprivileged writer may still use on the filesystem holding `dir`. */
export function freeBytes(dir: string): number {
  const st = statfsSync(dir);
  return Number(st.bavail) * Number(st.bsize);
}

export function assertFreeSpace(dir: string, reserveBytes: number): void {
  let free: number;
  try {
    free = freeBytes(dir);
  } catch {
    return; // cannot tell: the write itself will say (and is mapped to storage_full)
  }
  if (free < reserveBytes) {
    throw new FusionError('storage_full', `the disk holding ${dir} has ${Math.floor(free / 1024)} KiB free, below the ${Math.ceil(reserveBytes / 1024)} KiB reserve; no task was accepted. Free space (or lower --storage-reserve-mb) and retry.`, {
      details: { freeBytes: free, reserveBytes, retryAfterSeconds: 60 },
    });
  }
}

/**
 * `assertFreeSpace` for the submit path, reading the filesystem at most once per `maxAgeMs`:
 * under a flood one statfs serves many submits (O(1) per submit). A reading below the reserve is
 * not cached, so space freed by an admin is seen at the next submit; a write that still meets a
 * full disk in between is mapped to storage_full by the store path.
 */
export function cachedFreeSpaceCheck(dir: string, reserveBytes: number, maxAgeMs = 250, clock: () => number = Date.now): () => void {
  let okUntil = -Infinity;
  return () => {
    if (clock() < okUntil) return;
    assertFreeSpace(dir, reserveBytes);
    okUntil = clock() + maxAgeMs;
  };
}

export function freeBytesOrUndefined(dir: string): number | undefined {
  try {
    return freeBytes(dir);
  } catch {
    return undefined;
  }
}

/** Adds `readOnly` and the disk's free space to the health facts. */
export function withStorageFacts(dir: string, reserveBytes: number, readOnly: boolean, facts: () => Promise<Record<string, unknown>>): () => Promise<Record<string, unknown>> {
  return async () => ({ ...(await facts()), readOnly, storage: { freeBytes: freeBytesOrUndefined(dir) ?? null, reserveBytes } });
}
