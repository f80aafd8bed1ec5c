/**
 * Deterministic tar of in-memory members, and a strict reader for it.
 *
 * Packing goes through tar-fs like the attempt tarballs (members written to a private scratch
 * directory, packed in byte order of their names with mtime 0, uid/gid 0, mode 0600), so the
 * same members always give the same bytes. The reader accepts only what the packer writes
 * (regular files, ustar headers with valid checksums, zero padding, the end-of-archive blocks
 * and nothing after); anything else is reported with the member it belongs to.
 */
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { pack, type Headers } from 'tar-fs';
import { FusionError } from '../errors.js';

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

const BLOCK = 512;
/** Prefix of the scratch directories used while packing; the orphan reaper knows it. */
export const PACK_SCRATCH_PREFIX = 'fsn-seal-';
const EPOCH = new Date(0);

export function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/**
 * A member name the packer accepts: relative, `/`-separated, no `.`/`..` segment, printable
 * ASCII only (tar-fs writes a PAX header for any other name; no control character), and short enough for a plain ustar header (name ≤ 100 bytes, with a
 * prefix ≤ 155 bytes split at a `/`): a longer one would need a PAX header, which the reader
 * refuses, so the tarball could never be verified.
 */
export function isSafeMemberName(name: string): boolean {
  if (name === '' || name.startsWith('/') || name.includes('\\') || /[^\u0020-\u007e]/.test(name)) return false;
  if (!name.split('/').every((seg) => seg !== '' && seg !== '.' && seg !== '..')) return false;
  return fitsUstar(name);
}

function fitsUstar(name: string): boolean {
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes <= 100) return true;
  // Any `/` whose left part fits the prefix field and right part the name field.
  for (let i = name.indexOf('/'); i !== -1; i = name.indexOf('/', i + 1)) {
    if (Buffer.byteLength(name.slice(0, i), 'utf8') <= 155 && Buffer.byteLength(name.slice(i + 1), 'utf8') <= 100) return true;
  }
  return false;
}

/** Packs `members` (sorted by name here) into one deterministic tar. */
export async function packMembers(members: readonly TarMember[], scratchRoot: string = tmpdir()): Promise<Buffer> {
  const chunks: Buffer[] = [];
  await packInto(members, scratchRoot, (chunk) => chunks.push(chunk));
  return Buffer.concat(chunks);
}

/**
 * Where the deterministic pack of `members` first differs from `expected` (-1 when they are the
 * same bytes). Streamed: the re-pack is compared as it is produced, never held whole, so
 * verifying a tarball needs its own bytes in memory once, not twice.
 */
export async function firstDifferenceFromPack(members: readonly TarMember[], expected: Buffer, scratchRoot: string = tmpdir()): Promise<number> {
  let at = 0;
  let differs = -1;
  await packInto(members, scratchRoot, (chunk) => {
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

async function packInto(members: readonly TarMember[], scratchRoot: string, onChunk: (chunk: Buffer) => void): Promise<void> {
  const sorted = [...members].sort((a, b) => byteOrder(a.name, b.name));
  for (const [i, m] of sorted.entries()) {
    if (!isSafeMemberName(m.name)) throw new FusionError('internal_error', `unsafe tar member name ${JSON.stringify(m.name)}`);
    if (i > 0 && sorted[i - 1]!.name === m.name) throw new FusionError('internal_error', `duplicate tar member ${m.name}`);
  }
  const dir = await mkdtemp(join(scratchRoot, PACK_SCRATCH_PREFIX));
  try {
    for (const m of sorted) {
      const file = join(dir, m.name);
      await mkdir(dirname(file), { recursive: true, mode: 0o700 });
      await writeFile(file, m.data, { mode: 0o600, flag: 'wx' });
    }
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        onChunk(chunk);
        cb();
      },
    });
    const normalise = (h: Headers): Headers => ({ name: h.name, size: h.size, type: h.type, mode: 0o600, mtime: EPOCH, uid: 0, gid: 0 });
    await pipeline(pack(dir, { entries: sorted.map((m) => m.name), map: normalise, strict: true }), sink);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export class TarFormatError extends Error {
  override readonly name = 'TarFormatError';
  constructor(readonly member: string, message: string) {
    super(message);
  }
}

function cString(buf: Buffer, start: number, length: number): string {
  const field = buf.subarray(start, start + length);
  const nul = field.indexOf(0);
  return field.subarray(0, nul === -1 ? field.length : nul).toString('utf8');
}

function octal(buf: Buffer, start: number, length: number): number | null {
  const text = buf.subarray(start, start + length).toString('latin1').replace(/[\0 ]+$/, '').replace(/^ +/, '');
  if (!/^[0-7]{1,12}$/.test(text)) return null;
  return parseInt(text, 8);
}

function isZero(buf: Buffer): boolean {
  for (const b of buf) if (b !== 0) return false;
  return true;
}

/** Reads every member; throws TarFormatError naming the member (or the archive position). */
export function readMembers(tar: Buffer): ReadMember[] {
  const members: ReadMember[] = [];
  let offset = 0;
  for (;;) {
    if (offset + BLOCK > tar.length) throw new TarFormatError(`(archive end after ${members.at(-1)?.name ?? 'no member'})`, 'the archive is truncated: no end-of-archive blocks');
    const header = tar.subarray(offset, offset + BLOCK);
    if (isZero(header)) break;
    const rawName = cString(header, 0, 100);
    const prefix = cString(header, 345, 155);
    const name = prefix === '' ? rawName : `${prefix}/${rawName}`;
    const label = name === '' ? `(header at byte ${offset})` : name;
    const stored = octal(header, 148, 8);
    let sum = 0;
    for (let i = 0; i < BLOCK; i += 1) sum += i >= 148 && i < 156 ? 0x20 : header[i]!;
    if (stored === null || stored !== sum) throw new TarFormatError(label, `the tar header of ${label} is corrupt (checksum mismatch)`);
    const type = String.fromCharCode(header[156]!);
    if (type !== '0' && type !== '\0') throw new TarFormatError(label, `${label} is not a regular file (tar type ${JSON.stringify(type)})`);
    if (!isSafeMemberName(name)) throw new TarFormatError(label, `${label} has an unsafe name`);
    const size = octal(header, 124, 12);
    if (size === null) throw new TarFormatError(label, `the size field of ${label} is corrupt`);
    const dataStart = offset + BLOCK;
    const end = dataStart + Math.ceil(size / BLOCK) * BLOCK;
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

