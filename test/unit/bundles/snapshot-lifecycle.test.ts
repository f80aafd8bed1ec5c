/**
 * Repository snapshots on the daemon (docs/operations.md#repository-snapshots): bundles are read
 * and unpacked off the event loop (a timer keeps firing while a large archive of tiny entries is
 * read, where the same read on the main thread blocks it), and the retention prune removes old
 * unreferenced trees and stored bundles, never one a live task names or a run holds.
 */
import { tempPath } from '../../helpers/temp-dir.js';
import {  readdirSync, rmSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createBundleCache } from '../../../src/bundles/bundle-cache.js';
import { readBundleTar, writeBundleTar, type BundleEntry } from '../../../src/bundles/bundle-tar.js';
import { verifyOffThread } from '../../../src/bundles/off-thread.js';
import { pruneRepoSnapshots } from '../../../src/bundles/snapshot-retention.js';
import { openSqliteStore } from '../../../src/store/sqlite-store.js';
import { createLogger } from '../../../src/log.js';
import { createHash } from 'node:crypto';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const tmp = (prefix: string): string => {
  const d = tempPath(prefix);
  dirs.push(d);
  return d;
};
const log = createLogger({ level: 'silent' });
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

function bundleOf(files: Record<string, string>): { digest: string; data: Buffer } {
  const entries: BundleEntry[] = Object.entries(files).map(([path, text]) => ({ type: 'file', path, executable: false, data: Buffer.from(text) }));
  const data = writeBundleTar(entries);
  return { digest: sha(data), data };
}

/** The longest gap between ticks of a 2 ms timer while `work` runs. */
async function maxTimerGap(work: () => Promise<unknown>): Promise<{ gap: number; ticks: number }> {
  let last = performance.now();
  let gap = 0;
  let ticks = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    gap = Math.max(gap, now - last);
    last = now;
    ticks++;
  }, 2);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  gap = Math.max(gap, performance.now() - last);
  return { gap, ticks };
}

describe('bundles are read off the event loop', () => {
  it('a timer keeps firing while an archive of many tiny entries is read strictly; the same read on the main thread blocks it', async () => {
    const entries: BundleEntry[] = [];
    for (let d = 0; d < 100; d++) {
      entries.push({ type: 'dir', path: `d${d}` });
      for (let f = 0; f < 600; f++) entries.push({ type: 'file', path: `d${d}/f${f}`, executable: false, data: Buffer.from('x') });
    }
    const data = writeBundleTar(entries);
    const limits = { maxBytes: 256 * 1024 * 1024, maxEntries: 1_000_000 };
    // The baseline, measured in this run: the strict read on the main thread.
    const onMain = await maxTimerGap(async () => readBundleTar(data, limits));
    const offThread = await maxTimerGap(() => verifyOffThread(data, limits));
    expect(await verifyOffThread(writeBundleTar(entries), limits)).toMatchObject({ entries: entries.length, files: entries.filter((e) => e.type === 'file').length });
    expect(onMain.ticks).toBeLessThanOrEqual(1);
    expect(offThread.ticks).toBeGreaterThan(2);
    expect(offThread.gap).toBeLessThan(onMain.gap / 2);
  }, 60_000);

  it('an unpack reports a hostile archive as bundle_changed from the worker, and leaves no partial tree', async () => {
    const dir = tmp('fusion-snap-cache-');
    const cache = await createBundleCache({ dir, maxBytes: 1024 * 1024, log, flush: async () => undefined });
    const good = bundleOf({ 'a.txt': 'a' });
    const err = await cache.install({ digest: good.digest, data: Buffer.concat([good.data.subarray(0, 512), Buffer.alloc(1024)]) }).then(() => ({ code: 'none' }), (e: unknown) => e as { code: string });
    expect(err.code).toBe('bundle_changed');
    expect(readdirSync(dir)).toEqual([]);
    // Without a store, a tree that is gone is repo_snapshot_missing (never fetched, never repacked).
    const gone = await cache.checkout('f'.repeat(64)).then(() => ({ code: 'none' }), (e: unknown) => e as { code: string });
    expect(gone.code).toBe('repo_snapshot_missing');
  });
});

describe('snapshot retention', () => {
  it('removes old trees and bundles no live task names; never a tree a live task names, one a run holds, or a recent one', async () => {
    const dir = tmp('fusion-snap-prune-');
    const cache = await createBundleCache({ dir, maxBytes: 1024 * 1024, log, flush: async () => undefined });
    const [live, held, old, recent, storedOld] = ['live', 'held', 'old', 'recent', 'stored'].map((t) => bundleOf({ [`${t}.txt`]: t }));
    for (const b of [live!, held!, old!, recent!]) await cache.install(b);
    const year = new Date(Date.now() - 365 * 86_400_000);
    for (const b of [live!, held!, old!]) utimesSync(join(dir, b.digest), year, year);
    const release = cache.pin(held!.digest);

    const store = await openSqliteStore({ file: join(tmp('fusion-snap-db-'), 'fusion.db'), log });
    const task = (id: string, digest: string, data: Buffer) => store.createTask({
      id, workflow: 'investigate', repoDir: '/r', canonicalInput: '{}', canonicalInputSha256: 'c'.repeat(64), budgetPlan: '{}', options: {}, callerUid: null, bundle: { digest, data },
    });
    await task('investigate-live', live!.digest, live!.data);
    await task('investigate-done', storedOld!.digest, storedOld!.data);
    await store.transitionTask('investigate-done', 'initializing', 'failed', { error: { code: 'internal_error', message: 'x', state: 'initializing' } });

    // A 30-day retention now: only the year-old tree nobody names or holds goes; every row is recent.
    const first = await pruneRepoSnapshots({ store, cache, olderThanDays: 30, log });
    expect(first).toEqual({ trees: 1, bundles: 0 });
    expect(new Set(readdirSync(dir))).toEqual(new Set([live!.digest, held!.digest, recent!.digest]));
    // A month later, the run released its tree: all but the live task's tree and bundle go.
    release();
    const later = await pruneRepoSnapshots({ store, cache, olderThanDays: 30, now: Date.now() + 31 * 86_400_000, log });
    expect(later).toEqual({ trees: 2, bundles: 1 });
    expect(readdirSync(dir)).toEqual([live!.digest]);
    expect(await store.getRepoBundle(live!.digest)).not.toBeNull();
    expect(await store.getRepoBundle(storedOld!.digest)).toBeNull();
    await store.close();
  });
});
