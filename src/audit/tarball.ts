/**
 * Sealed attempt tarballs (docs/behaviour.md#d7): every regular file of an attempt directory (log,
 * seal, answer, request, …) packed into one tar whose sha256 the supervisor records, and signs
 * with an HMAC where a key is configured, so any later change to the evidence is detected.
 *
 * The tar is deterministic: entries sorted by name, mtime 0, uid/gid 0, no user/group names,
 * mode 0600. Packing the same bytes twice gives the same digest, so a digest can be recomputed
 * and compared at any time. Symlinks and other non-regular entries are never packed or followed.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, readdir, rm } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { pack } from 'tar-fs';
import type { Headers } from 'tar-fs';
import { FusionError } from '../errors.js';

export interface PackedAttempt {
  path: string;
  sha256: string;
  bytes: number;
  /** Names of the packed files, in tar order. */
  files: string[];
}

export interface VerifiedTarball {
  sha256: string;
  bytes: number;
}

const HEX64 = /^[0-9a-f]{64}$/;
const ENTRY_MODE = 0o600;
const EPOCH = new Date(0);
/** Domain separation: an attempt-tarball signature can never be replayed as another HMAC. */
const SIGNATURE_CONTEXT = 'fusion.attempt-tarball.v1\0';

/** Sorted names of the regular files directly in `dir` (no recursion, symlinks skipped). */
export async function listAttemptFiles(dir: string, exclude: readonly string[] = []): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const names: string[] = [];
  for (const entry of entries) {
    if (exclude.includes(entry.name)) continue;
    // Dirent types come from lstat semantics: a symlink is reported as a symlink, never followed.
    if (entry.isFile()) names.push(entry.name);
  }
  // Byte order, independent of locale.
  return names.sort((a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
}

/**
 * Packs every regular file of `dir` into `outFile` (created exclusively, 0600, fsynced).
 * `outFile` may live inside `dir`; it is never packed into itself.
 */
export async function packAttempt(dir: string, outFile: string): Promise<PackedAttempt> {
  const absDir = resolve(dir);
  const absOut = resolve(outFile);
  const exclude = dirname(absOut) === absDir ? [basename(absOut)] : [];
  const files = await listAttemptFiles(absDir, exclude);

  let unexpected: string | undefined;
  const normalise = (header: Headers): Headers => {
    // A file swapped for a symlink (or anything else) after listing: tar-fs lstats, so it is not
    // followed; refuse the tarball instead of packing a link.
    if (header.type !== 'file') unexpected ??= `${header.name} is a ${header.type}, not a regular file`;
    return { name: header.name, size: header.size, type: header.type, mode: ENTRY_MODE, mtime: EPOCH, uid: 0, gid: 0 };
  };

  const hash = createHash('sha256');
  let bytes = 0;
  const digest = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      hash.update(chunk);
      bytes += chunk.length;
      callback(null, chunk);
    },
  });

  let handle;
  try {
    handle = await open(absOut, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  } catch (err) {
    // Never overwrite: an existing tarball is evidence already recorded somewhere.
    throw new FusionError('artifact_error', `attempt tarball could not be created: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  try {
    // The stream owns the handle from here: it fsyncs (flush) and closes it when done or destroyed.
    const out = handle.createWriteStream({ flush: true });
    const closed = new Promise<void>((done) => out.once('close', () => done()));
    try {
      await pipeline(pack(absDir, { entries: files, map: normalise, strict: true }), digest, out);
    } finally {
      if (!out.closed) await closed;
    }
  } catch (err) {
    await rm(absOut, { force: true });
    throw new FusionError('artifact_error', `attempt tarball could not be written: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  if (unexpected !== undefined) {
    await rm(absOut, { force: true });
    throw new FusionError('artifact_error', `attempt tarball refused: ${unexpected}`);
  }
  await syncDir(dirname(absOut));
  return { path: absOut, sha256: hash.digest('hex'), bytes, files };
}

async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Recomputes the tarball digest; throws `artifact_error` unless it equals `sha256`. */
export async function verifyTarball(path: string, sha256: string): Promise<VerifiedTarball> {
  if (!HEX64.test(sha256)) throw new FusionError('artifact_error', 'attempt tarball digest must be a lowercase hex sha256');
  let stats;
  try {
    stats = await lstat(path);
  } catch (err) {
    throw new FusionError('artifact_error', `attempt tarball is missing: ${path}`, { cause: err });
  }
  if (!stats.isFile()) throw new FusionError('artifact_error', `attempt tarball is not a regular file: ${path}`);
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const hash = createHash('sha256');
    const buffer = Buffer.alloc(1024 * 1024);
    let bytes = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) break;
      hash.update(buffer.subarray(0, bytesRead));
      bytes += bytesRead;
    }
    const actual = hash.digest('hex');
    if (actual !== sha256) {
      throw new FusionError('artifact_error', 'attempt tarball digest mismatch', { details: { path, expected: sha256, actual } });
    }
    return { sha256: actual, bytes };
  } finally {
    await handle.close();
  }
}

/** HMAC-SHA256 (hex) of a tarball digest under `key`. */
export function signDigest(sha256: string, key: string | Uint8Array): string {
  if (!HEX64.test(sha256)) throw new FusionError('artifact_error', 'attempt tarball digest must be a lowercase hex sha256');
  if (key.length === 0) throw new FusionError('invalid_config', 'tarball signing key must not be empty');
  return createHmac('sha256', key).update(SIGNATURE_CONTEXT + sha256, 'utf8').digest('hex');
}

/** Constant-time check of a signature made by `signDigest`. */
export function verifySignature(sha256: string, signature: string, key: string | Uint8Array): boolean {
  if (!HEX64.test(signature)) return false;
  const expected = Buffer.from(signDigest(sha256, key), 'hex');
  return timingSafeEqual(expected, Buffer.from(signature, 'hex'));
}
