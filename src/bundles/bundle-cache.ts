/**
 * A worker's cache of unpacked repository bundles, by digest, under its own data directory
 * (`<data>/bundles/<digest>/`; docs/operations.md#cluster-mode).
 *
 * A bundle is fetched from the store, its sha256 recomputed over the bytes and compared with the
 * digest the task recorded at submission, read strictly (bundle-tar.ts: no `..`, no absolute
 * path, no hard link or device, no symlink leaving the tree, nothing written through a symlink,
 * bounded size and entry count), and only then unpacked: into a fresh `.partial-*` directory,
 * flushed to disk and renamed into place when complete, so a tree at its digest's path is
 * always whole, after a crash or a power loss too. Root-owned,
 * directories 0755 and files 0644 (0755 when executable), so any sandbox uid can read it and none
 * can change it; the sandbox mounts it read-only as the repository. A second task with the same
 * digest reuses the tree. Anything that does not verify is `bundle_changed`, and nothing runs.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, lstat, mkdir, mkdtemp, readdir, realpath, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import { readBundleTar } from './bundle-tar.js';
import { MAX_BUNDLE_ENTRIES } from './pack-as-caller.js';

/** Where bundles are read from (the Store port's method). */
export interface BundleSource {
  getRepoBundle(digest: string): Promise<{ digest: string; data: Buffer } | null>;
}

export interface BundleCache {
  /** The physical path of the verified, unpacked tree of `digest`; throws bundle_changed. */
  checkout(digest: string): Promise<string>;
}

const execFileAsync = promisify(execFile);
const DIGEST = /^[0-9a-f]{64}$/u;
const PARTIAL_PREFIX = '.partial-';

/**
 * Writes everything under `path` to disk: syncfs(2) of its filesystem through coreutils'
 * `sync -f` (one call however many files, where an fsync per file would cost a journal commit
 * each).
 */
async function syncFilesystem(path: string): Promise<void> {
  await execFileAsync('sync', ['-f', path], { timeout: 600_000 });
}

export async function createBundleCache(options: {
  dir: string; store: BundleSource; maxBytes: number; log: Logger;
  /** Makes the unpacked tree durable before it is renamed into place (default: syncfs). */
  flush?: (path: string) => Promise<void>;
}): Promise<BundleCache> {
  const flush = options.flush ?? syncFilesystem;
  const { dir, store, log } = options;
  await mkdir(dir, { recursive: true, mode: 0o755 });
  await chmod(dir, 0o755);
  // Unpacks a killed daemon left half done are never used: drop them.
  for (const name of await readdir(dir)) {
    if (name.startsWith(PARTIAL_PREFIX)) await rm(join(dir, name), { recursive: true, force: true });
  }
  const inflight = new Map<string, Promise<string>>();

  const unpack = async (digest: string): Promise<string> => {
    const final = join(dir, digest);
    const existing = await lstat(final).catch(() => null);
    if (existing?.isDirectory() === true) return realpath(final);
    const row = await store.getRepoBundle(digest);
    if (row === null) throw new FusionError('bundle_changed', `the repository bundle ${digest.slice(0, 16)}… recorded on the task is missing from the store; nothing ran`, { details: { digest } });
    const actual = createHash('sha256').update(row.data).digest('hex');
    if (actual !== digest) {
      throw new FusionError('bundle_changed', `the repository bundle's bytes changed since submission (sha256 ${actual.slice(0, 16)}…, recorded ${digest.slice(0, 16)}…); nothing ran. Submit the task again`, {
        details: { digest, actual },
      });
    }
    const entries = readBundleTar(row.data, { maxBytes: options.maxBytes, maxEntries: MAX_BUNDLE_ENTRIES });
    const tmp = await mkdtemp(join(dir, PARTIAL_PREFIX));
    try {
      await chmod(tmp, 0o755);
      for (const e of entries) {
        const path = join(tmp, e.path);
        if (e.type === 'dir') {
          await mkdir(path, { mode: 0o755 });
          await chmod(path, 0o755);
        } else if (e.type === 'file') {
          const mode = e.executable ? 0o755 : 0o644;
          await writeFile(path, e.data, { mode, flag: 'wx' });
          await chmod(path, mode);
        } else {
          await symlink(e.target, path);
        }
      }
      // Durable before visible: a rename that outlives a power loss whose file data did not
      // would leave a torn tree at the digest's path, reused by every later task.
      await flush(tmp);
      try {
        await rename(tmp, final);
      } catch (err) {
        // Another checkout of the same digest finished first: its tree is the same.
        if (!['EEXIST', 'ENOTEMPTY'].includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
        await rm(tmp, { recursive: true, force: true });
      }
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      throw err;
    }
    log.info({ digest, entries: entries.length, bytes: row.data.length }, 'repository bundle unpacked');
    return realpath(final);
  };

  return {
    checkout(digest) {
      if (!DIGEST.test(digest)) return Promise.reject(new FusionError('bundle_changed', `the task records an invalid repository bundle digest ${JSON.stringify(digest.slice(0, 80))}; nothing ran`));
      const running = inflight.get(digest);
      if (running !== undefined) return running;
      const p = unpack(digest).finally(() => inflight.delete(digest));
      inflight.set(digest, p);
      return p;
    },
  };
}
