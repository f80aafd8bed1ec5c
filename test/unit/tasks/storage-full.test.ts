import { describe, expect, it } from 'vitest';
import { FusionError } from '../../../src/errors.js';
import { asStorageFull } from '../../../src/tasks/task-service.js';
import { assertFreeSpace, cachedFreeSpaceCheck } from '../../../src/tasks/free-space.js';

describe('full disk is a state (storage_full), not a bug', () => {
  it('maps SQLITE_FULL and ENOSPC (also as the cause of a store_error) to a retryable storage_full', () => {
    for (const err of [
      Object.assign(new Error('SQLITE_FULL: database or disk is full'), { code: 'SQLITE_FULL' }),
      Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' }),
      new FusionError('store_error', 'insert failed', { cause: Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' }) }),
    ]) {
      const mapped = asStorageFull(err) as FusionError;
      expect(mapped.code).toBe('storage_full');
      expect(mapped.retryable).toBe(true);
      expect(mapped.httpStatus).toBe(507);
    }
    const other = new Error('SQLITE_BUSY');
    expect(asStorageFull(other)).toBe(other);
  });

  it('refuses below the reserve, naming the free space and the reserve', () => {
    expect(() => assertFreeSpace('/', Number.MAX_SAFE_INTEGER)).toThrow(/KiB free, below the .* KiB reserve; no task was accepted/);
    expect(() => assertFreeSpace('/', 0)).not.toThrow();
  });

  it('the submit-path check reads the disk at most once per interval, and never caches a refusal', () => {
    let t = 0;
    const clock = (): number => t;
    const ok = cachedFreeSpaceCheck('/', 0, 250, clock);
    ok();
    ok(); // within the interval: no statfs (nothing to observe but that it does not throw)
    const full = cachedFreeSpaceCheck('/', Number.MAX_SAFE_INTEGER, 250, clock);
    expect(() => full()).toThrow(/below the .* KiB reserve/);
    expect(() => full()).toThrow(/below the .* KiB reserve/); // a refusal is checked again each time
    t = 1000;
    ok();
  });
});
