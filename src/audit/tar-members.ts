/**
 * The audit tarballs' archive format (attempt tarballs and the task tarball): deterministic
 * ustar of regular files, written and read strictly through the one codec (common/ustar.ts).
 *
 * Written: members in byte order of their names, mode 0600, mtime 0, uid/gid 0, the `space`
 * numeric layout tar-fs wrote when these tarballs were first sealed (so every digest recorded
 * since still verifies), no PAX header. The same members always give the same bytes.
 * Read: only what the writer writes (regular files, ustar headers with valid checksums, the
 * end-of-archive blocks); anything else is reported with the member it belongs to.
 */
import { FusionError } from '../errors.js';
import { BLOCK, byteOrder, decodeHeader, endOfArchive, fileEntry, isZeroBlock, paddedSize, ustarSplit } from '../common/ustar.js';

export { byteOrder } from '../common/ustar.js';

export interface TarMember {
  name: string;
  data: Buffer;
}

export interface ReadMember extends TarMember {
  /** Byte offset of the member's header in the archive. */
  offset: number;
  /** Offset just past its padded data. */
  end: number;
}

/** Prefix of the scratch directories offline verification writes attempt files to; the orphan reaper knows it. */
export const PACK_SCRATCH_PREFIX = 'fsn-seal-';
/** Every member's mode in the archive. */
export const MEMBER_MODE = 0o600;

/**
 * A member name the packer accepts: relative, `/`-separated, no `.`/`..` segment, printable
 * ASCII only (no control character), and short enough for a plain ustar header (name ≤ 100
 * bytes, with a prefix ≤ 155 bytes split at a `/`): any other name would need a PAX header,
 * which the reader refuses, so the tarball could never be verified.
 */
export function isSafeMemberName(name: string): boolean {
  if (name === '' || name.startsWith('/') || name.includes('\\') || /[^\u0020-\u007e]/.test(name)) return false;
  if (!name.split('/').every((seg) => seg !== '' && seg !== '.' && seg !== '..')) return false;
  return ustarSplit(name) !== null;
}

/** The header, data and padding of one member (its name already checked with isSafeMemberName). */
export function memberChunks(name: string, data: Buffer): Buffer[] {
  return fileEntry(name, MEMBER_MODE, data, 'space');
}

/** Packs `members` (sorted by name here) into one deterministic tar. */
export async function packMembers(members: readonly TarMember[]): Promise<Buffer> {
  const chunks: Buffer[] = [];
  packInto(members, (chunk) => chunks.push(chunk));
  return Buffer.concat(chunks);
}

/**
 * Where the deterministic pack of `members` first differs from `expected` (-1 when they are the
 * same bytes). Streamed: the re-pack is compared as it is produced, never held whole, so
 * verifying a tarball needs its own bytes in memory once, not twice.
 */
export async function firstDifferenceFromPack(members: readonly TarMember[], expected: Buffer): Promise<number> {
  let at = 0;
  let differs = -1;
  packInto(members, (chunk) => {
    if (differs !== -1) return;
    const want = expected.subarray(at, at + chunk.length);
    if (want.length !== chunk.length || !want.equals(chunk)) {
      let i = 0;
      while (i < want.length && want[i] === chunk[i]) i += 1;
      differs = at + i;
    }
    at += chunk.length;
  });
  if (differs === -1 && at !== expected.length) differs = at;
  return differs;
}

function packInto(members: readonly TarMember[], onChunk: (chunk: Buffer) => void): void {
  const sorted = [...members].sort((a, b) => byteOrder(a.name, b.name));
  for (const [i, m] of sorted.entries()) {
    if (!isSafeMemberName(m.name)) throw new FusionError('internal_error', `unsafe tar member name ${JSON.stringify(m.name)}`);
    if (i > 0 && sorted[i - 1]!.name === m.name) throw new FusionError('internal_error', `duplicate tar member ${m.name}`);
  }
  for (const m of sorted) for (const chunk of memberChunks(m.name, m.data)) onChunk(chunk);
  onChunk(endOfArchive());
}

export class TarFormatError extends Error {
  override readonly name = 'TarFormatError';
  constructor(readonly member: string, message: string) {
    super(message);
  }
}

/** Reads every member; throws TarFormatError naming the member (or the archive position). */
export function readMembers(tar: Buffer): ReadMember[] {
  const members: ReadMember[] = [];
  let offset = 0;
  for (;;) {
    if (offset + BLOCK > tar.length) throw new TarFormatError(`(archive end after ${members.at(-1)?.name ?? 'no member'})`, 'the archive is truncated: no end-of-archive blocks');
    const header = tar.subarray(offset, offset + BLOCK);
    if (isZeroBlock(header)) break;
    const d = decodeHeader(header);
    const name = d.name;
    const label = name === '' ? `(header at byte ${offset})` : name;
    if (!d.checksumOk) throw new TarFormatError(label, `the tar header of ${label} is corrupt (checksum mismatch)`);
    const type = d.typeFlag;
    if (type !== '0' && type !== '\0') throw new TarFormatError(label, `${label} is not a regular file (tar type ${JSON.stringify(type)})`);
    if (!isSafeMemberName(name)) throw new TarFormatError(label, `${label} has an unsafe name`);
    const size = d.size;
    if (size === null) throw new TarFormatError(label, `the size field of ${label} is corrupt`);
    const dataStart = offset + BLOCK;
    const end = dataStart + paddedSize(size);
    if (end > tar.length) throw new TarFormatError(label, `${label} is truncated`);
    if (members.some((m) => m.name === name)) throw new TarFormatError(label, `${label} appears twice`);
    // A view, not a copy: a member's bytes are the archive's (verifying a large tarball holds it once).
    members.push({ name, data: tar.subarray(dataStart, dataStart + size), offset, end });
    offset = end;
  }
  return members;
}

/** The member whose bytes (header, data or padding) contain `position`, for error messages. */
export function memberAt(members: readonly ReadMember[], position: number): string {
  const hit = members.find((m) => position >= m.offset && position < m.end);
  return hit?.name ?? '(end-of-archive blocks)';
}

