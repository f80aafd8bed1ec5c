/**
 * A write refused for lack of space is a state (`storage_full`, 507, retryable), not a bug: the
 * one mapping every submit path (tasks, research runs) applies to its store errors.
 */
import { FusionError } from '../errors.js';

/** `err` as `storage_full` when it (or its cause) is a full disk; otherwise `err` itself. */
export function asStorageFull(err: unknown, what = 'task'): unknown {
  if (isStorageFull(err)) {
    return new FusionError('storage_full', `the disk holding the daemon's data is full; no ${what} was accepted. Free space and retry.`, { cause: err, details: { retryAfterSeconds: 60 } });
  }
  return err;
}

/** True when `err` (or anything in its cause chain) is the disk or the database being full. */
export function isStorageFull(err: unknown): boolean {
  let e: unknown = err;
  for (let depth = 0; depth < 8 && e !== undefined && e !== null; depth++) {
    if (e instanceof FusionError) {
      // A FusionError's message may quote a sandbox's own words: only its code and cause count.
      if (e.code === 'storage_full') return true;
    } else {
      const code = String((e as { code?: unknown }).code ?? '');
      if (code === 'ENOSPC' || code === 'EDQUOT' || code === 'SQLITE_FULL') return true;
      if (/SQLITE_FULL|ENOSPC|database or disk is full/i.test(String((e as Error).message ?? ''))) return true;
    }
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}
