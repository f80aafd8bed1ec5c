/**
 * Sealed attempt tarballs (docs/behaviour.md#d7): every regular file of an attempt directory (log,
 * seal, answer, request, …) packed into one tar whose sha256 the supervisor records in the
 * attempt's row; the task tarball names each attempt tarball's digest in its manifest, and that
 * manifest is what the Ed25519 signature covers (signing.ts), so any later change to the
 * evidence is detected.
 *
 * The tar is the audit format of tar-members.ts (one codec, common/ustar.ts): entries sorted by
 * name, mtime 0, uid/gid 0, no user/group names, mode 0600. Packing the same bytes twice gives
 * the same digest, so a digest can be recomputed and compared at any time (offline verification
 * packs the files of each attempt again from the task tarball). Symlinks and other non-regular
 * entries are never packed or followed.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, readdir, rm, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { FusionError } from '../errors.js';
import { byteOrder, endOfArchive } from '../common/ustar.js';
import { isSafeMemberName, memberChunks } from './tar-members.js';

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
  return names.sort(byteOrder);
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

  const hash = createHash('sha256');
  let bytes = 0;

  let out: FileHandle;
  try {
    out = await open(absOut, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  } catch (err) {
    // Never overwrite: an existing tarball is evidence already recorded somewhere.
    throw new FusionError('artifact_error', `attempt tarball could not be created: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  const write = async (chunk: Buffer): Promise<void> => {
    hash.update(chunk);
    bytes += chunk.length;
    for (let at = 0; at < chunk.length;) at += (await out.write(chunk, at, chunk.length - at)).bytesWritten;
  };
  try {
    try {
      for (const name of files) {
        if (!isSafeMemberName(name)) throw new FusionError('artifact_error', `attempt tarball refused: ${JSON.stringify(name)} is not a plain file name`);
        for (const chunk of memberChunks(name, await readRegular(join(absDir, name)))) await write(chunk);
      }
      await write(endOfArchive());
      await out.sync();
    } finally {
      await out.close();
    }
  } catch (err) {
    await rm(absOut, { force: true });
    if (err instanceof FusionError) throw err;
    throw new FusionError('artifact_error', `attempt tarball could not be written: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  await syncDir(dirname(absOut));
  return { path: absOut, sha256: hash.digest('hex'), bytes, files };
}

/**
 * A listed file's bytes. Opened without following a link and checked regular once open: a file
 * swapped for a symlink (or anything else) after listing refuses the tarball instead of being
 * packed; a file that changes size while read does too.
 */
async function readRegular(path: string): Promise<Buffer> {
  let handle: FileHandle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw new FusionError('artifact_error', `attempt tarball refused: ${basename(path)} is a symlink, not a regular file`);
    throw err;
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) throw new FusionError('artifact_error', `attempt tarball refused: ${basename(path)} is not a regular file`);
    const data = await handle.readFile();
    if (data.length !== stats.size) throw new FusionError('artifact_error', `attempt tarball refused: ${basename(path)} changed size while it was packed`);
    return data;
  } finally {
    await handle.close();
  }
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
