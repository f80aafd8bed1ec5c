/**
 * The daemon's repository snapshots: unpacked repository bundles by digest, under its own data
 * directory (`<data>/bundles/<digest>/`; docs/operations.md#repository-snapshots).
 *
 * A tree comes either from bytes just packed on this host (`install`, single-host mode: packed
 * as the caller when the run starts) or from the store (`checkout`, cluster mode: packed at
 * submission, maybe by another daemon). Either way its sha256 is recomputed over the bytes and
 * compared with the digest, the archive is read strictly (bundle-tar.ts: no `..`, no absolute
 * path, no hard link or device, no symlink leaving the tree, nothing written through a symlink,
 * bounded size and entry count), and only then unpacked: into a fresh `.partial-*` directory,
 * flushed to disk and renamed into place when complete, so a tree at its digest's path is
 * always whole, after a crash or a power loss too. The read and the unpack run in a worker
 * thread (off-thread.ts): the event loop keeps serving meanwhile. Root-owned, directories 0755
 * and files 0644 (0755 when executable), so any sandbox uid can read it and none can change it;
 * the sandbox mounts it read-only as the repository, and every host-side read of the task's
 * repository (citations, replay) reads it, never the caller's path. A second task with the same
 * digest reuses the tree. Anything that does not verify is `bundle_changed`, and nothing runs; a
 * tree a resumed single-host task needs that is gone is `repo_snapshot_missing`.
 *
 * Trees are pruned (`prune`) once no non-terminal task names them and they were last used
 * before the retention; a tree a run of this daemon holds (`pin`) is never pruned.
 */
import { chmod, lstat, mkdir, readdir, realpath, rename, rm, stat, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import { MAX_BUNDLE_ENTRIES } from './pack-as-caller.js';
import { PARTIAL_PREFIX } from './bundle-worker.js';
import { unpackOffThread } from './off-thread.js';

/** Where bundles are read from (the Store port's method). */
export interface BundleSource {
  getRepoBundle(digest: string): Promise<{ digest: string; data: Buffer } | null>;
}

export interface BundleCache {
  /** The physical path of the verified, unpacked tree of `digest`; throws bundle_changed (or repo_snapshot_missing without a store). */
  checkout(digest: string): Promise<string>;
  /** Verifies and unpacks bytes packed on this host (unless the tree is there already); its physical path. `data` is moved to the worker: not usable after. */
  install(bundle: { digest: string; data: Buffer }): Promise<string>;
  /** Holds the tree of `digest` against pruning until the returned function is called. */
  pin(digest: string): () => void;
  /** Removes trees not in `live`, not pinned, and last used before `beforeMs`; the digests removed. */
  prune(live: ReadonlySet<string>, beforeMs: number): Promise<string[]>;
}

const DIGEST = /^[0-9a-f]{64}$/u;

export async function createBundleCache(options: {
  /** Absent on a single host: a missing tree is repo_snapshot_missing, never fetched. */
  dir: string; store?: BundleSource; maxBytes: number; log: Logger;
  /** Makes the unpacked tree durable before it is renamed into place (default: syncfs of its filesystem, in the worker). */
  flush?: (path: string) => Promise<void>;
}): Promise<BundleCache> {
  const flush = options.flush ?? (async () => undefined);
  const { dir, store, log } = options;
  await mkdir(dir, { recursive: true, mode: 0o755 });
  await chmod(dir, 0o755);
  // Unpacks a killed daemon left half done are never used: drop them.
  for (const name of await readdir(dir)) {
    if (name.startsWith(PARTIAL_PREFIX)) await rm(join(dir, name), { recursive: true, force: true });
  }
  const inflight = new Map<string, Promise<string>>();
  const pins = new Map<string, number>();

  /** The tree of `digest` when it is there (marked used now, for pruning), else null. */
  const existing = async (digest: string): Promise<string | null> => {
    const final = join(dir, digest);
    const info = await lstat(final).catch(() => null);
    if (info?.isDirectory() !== true) return null;
    const now = new Date();
    await utimes(final, now, now).catch(() => undefined);
    return realpath(final);
  };

  const place = async (data: Buffer, digest: string): Promise<string> => {
    const final = join(dir, digest);
    const bytes = data.length;
    const { entries, partial } = await unpackOffThread(data, digest, dir, { maxBytes: options.maxBytes, maxEntries: MAX_BUNDLE_ENTRIES }, options.flush === undefined);
    try {
      // Durable before visible: a rename that outlives a power loss whose file data did not
      // would leave a torn tree at the digest's path, reused by every later task.
      await flush(partial);
      try {
        await rename(partial, final);
      } catch (err) {
        // Another checkout of the same digest finished first: its tree is the same.
        if (!['EEXIST', 'ENOTEMPTY'].includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
        await rm(partial, { recursive: true, force: true });
      }
    } catch (err) {
      await rm(partial, { recursive: true, force: true });
      throw err;
    }
    log.info({ digest, entries, bytes }, 'repository bundle unpacked');
    return realpath(final);
  };

  const fromStore = async (digest: string): Promise<string> => {
    const here = await existing(digest);
    if (here !== null) return here;
    if (store === undefined) {
      throw new FusionError('repo_snapshot_missing', `the repository snapshot ${digest.slice(0, 16)}… this task started over is gone from ${dir}; the task was not run over the repository as it is now. Submit it again`, { details: { digest } });
    }
    const row = await store.getRepoBundle(digest);
    if (row === null) throw new FusionError('bundle_changed', `the repository bundle ${digest.slice(0, 16)}… recorded on the task is missing from the store; nothing ran`, { details: { digest } });
    return place(row.data, digest);
  };

  const once = (digest: string, work: () => Promise<string>): Promise<string> => {
    if (!DIGEST.test(digest)) return Promise.reject(new FusionError('bundle_changed', `the task records an invalid repository bundle digest ${JSON.stringify(digest.slice(0, 80))}; nothing ran`));
    const running = inflight.get(digest);
    if (running !== undefined) return running;
    const p = work().finally(() => inflight.delete(digest));
    inflight.set(digest, p);
    return p;
  };

  return {
    checkout: (digest) => once(digest, () => fromStore(digest)),
    install: (bundle) => once(bundle.digest, async () => (await existing(bundle.digest)) ?? place(bundle.data, bundle.digest)),
    pin(digest) {
      pins.set(digest, (pins.get(digest) ?? 0) + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const left = (pins.get(digest) ?? 1) - 1;
        if (left <= 0) pins.delete(digest);
        else pins.set(digest, left);
      };
    },
    async prune(live, beforeMs) {
      const removed: string[] = [];
      for (const name of await readdir(dir)) {
        if (!DIGEST.test(name) || live.has(name) || pins.has(name) || inflight.has(name)) continue;
        const info = await stat(join(dir, name)).catch(() => null);
        if (info === null || info.mtimeMs >= beforeMs) continue;
        // Checked again just before the removal: a run may have pinned it meanwhile.
        if (pins.has(name) || inflight.has(name)) continue;
        await rm(join(dir, name), { recursive: true, force: true });
        removed.push(name);
        log.info({ digest: name }, 'retention: repository snapshot removed');
      }
      return removed;
    },
  };
}
