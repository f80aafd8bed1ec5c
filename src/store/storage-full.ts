/**
 * A write refused for lack of space is a state (`storage_full`, 507, retryable), not a bug: the
 * one mapping every submit path (tasks, research runs) applies to its store errors.
 */
import { FusionError } from '../errors.js';

/** `err` as `storage_full` when it (or its cause) is a full disk; otherwise `err` itself. */
export function asStorageFull(err: unknown, what = 'task'): unknown {
  const chain = [err, (err as { cause?: unknown })?.cause];
  const text = chain.map((e) => `${String((e as { code?: unknown })?.code ?? '')} ${String((e as Error)?.message ?? '')}`).join(' ');
  if (/SQLITE_FULL|ENOSPC|database or disk is full/i.test(text)) {
    return new FusionError('storage_full', `the disk holding the daemon's data is full; no ${what} was accepted. Free space and retry.`, { cause: err, details: { retryAfterSeconds: 60 } });
  }
  return err;
}
