/**
 * Small crash-safe file helpers: a file that a receipt or a commit depends on is fsynced with
 * its directory before the caller is told it exists.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, writeSync, constants } from 'node:fs';
import { promises as fsp } from 'node:fs';
import { dirname } from 'node:path';

export function fsyncDir(dir: string): void {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** mkdir -p with a mode, fsyncing the parent of each created level. */
export function mkdirDurable(dir: string, mode = 0o700): void {
  const created = mkdirSync(dir, { recursive: true, mode });
  if (created !== undefined) fsyncDir(dirname(dir));
}

/** Writes via a temp file + rename, fsyncing the file and its directory. */
export function writeFileDurable(file: string, data: string | Buffer, mode = 0o600): void {
  const tmp = `${file}.tmp-${process.pid}`;
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, mode);
  try {
    writeSync(fd, typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
  fsyncDir(dirname(file));
}

/**
 * The same three helpers off the event loop (fsync in libuv's pool): for writes on a path that
 * many requests share, where a synchronous fsync would stall every receipt behind it.
 */
export async function fsyncDirAsync(dir: string): Promise<void> {
  const handle = await fsp.open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export async function mkdirDurableAsync(dir: string, mode = 0o700): Promise<void> {
  const created = await fsp.mkdir(dir, { recursive: true, mode });
  if (created !== undefined) await fsyncDirAsync(dirname(dir));
}

export async function writeFileDurableAsync(file: string, data: string | Buffer, mode = 0o600): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}`;
  const handle = await fsp.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, mode);
  try {
    await handle.writeFile(typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fsp.rename(tmp, file);
  await fsyncDirAsync(dirname(file));
}
