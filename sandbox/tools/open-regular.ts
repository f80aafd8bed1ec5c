/**
 * Opening a repository file for reading without ever blocking on it. A FIFO opened O_RDONLY
 * blocks until a writer appears (forever, in a read-only repository), and a device's open can
 * have side effects: so the type is checked with lstat before any open, the open itself is
 * O_NONBLOCK|O_NOFOLLOW (a FIFO swapped in after the lstat returns at once), and the type is
 * checked again on the descriptor. Anything but a regular file is reported as skipped, by kind.
 */
import { constants, type Stats } from 'node:fs';
import { lstat, open, type FileHandle } from 'node:fs/promises';

/** What a non-regular file is, for the tools' "skipped" notes (null for a regular file). */
export function specialKind(st: Stats): string | null {
  if (st.isFile()) return null;
  if (st.isDirectory()) return 'directory';
  if (st.isFIFO()) return 'FIFO';
  if (st.isSocket()) return 'socket';
  if (st.isCharacterDevice()) return 'character device';
  if (st.isBlockDevice()) return 'block device';
  if (st.isSymbolicLink()) return 'symbolic link';
  return 'special file';
}

export type OpenedRegular = { fh: FileHandle; st: Stats; special?: undefined } | { special: string };

/** Opens `realPath` (symlink-free, inside the root) if it is a regular file; never blocks. */
export async function openRegularFile(realPath: string): Promise<OpenedRegular> {
  const before = specialKind(await lstat(realPath));
  if (before !== null) return { special: before };
  const fh = await open(realPath, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const st = await fh.stat();
    const now = specialKind(st);
    if (now !== null) {
      await fh.close();
      return { special: now };
    }
    return { fh, st };
  } catch (err) {
    await fh.close().catch(() => undefined);
    throw err;
  }
}
