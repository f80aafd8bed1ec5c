/**
 * The repository bundle's archive format (docs/security.md#repository-bundles): a plain ustar
 * holding directories, regular files and relative symlinks, written deterministically and read
 * strictly.
 *
 * Written: entries in byte order of their paths (a directory as `path/`), mtime 0, uid/gid 0,
 * no user or group names, modes normalised (directories 0755, files 0644 or 0755 when any exec
 * bit was set, symlinks 0777). The same tree therefore always gives the same bytes, and the
 * sha256 of those bytes is the bundle's content address.
 *
 * Read: only what the writer writes. Every header's checksum and ustar magic are checked; hard
 * links, devices, FIFOs, PAX/GNU extension headers and anything else are refused; a path must be
 * relative with no `.`/`..`/empty segment; every entry's parent must be a directory entry seen
 * before it (so nothing is ever written through a symlink); each symlink must resolve inside the
 * tree (symlink-paths.ts); no path twice; sizes bounded. Trailing bytes after the end-of-archive
 * blocks are refused too, so one digest has one meaning.
 */
import { FusionError } from '../errors.js';
import { resolvesInside, type LinkLookup } from './symlink-paths.js';

export type BundleEntry =
  | { type: 'dir'; path: string }
  | { type: 'file'; path: string; executable: boolean; data: Buffer }
  | { type: 'symlink'; path: string; target: string };

const BLOCK = 512;
const DIR_MODE = 0o755;
const FILE_MODE = 0o644;
const EXEC_MODE = 0o755;
const LINK_MODE = 0o777;

/** Bytes an entry takes in the archive (header + data padded to whole blocks). */
export function entryArchiveBytes(dataBytes: number): number {
  return BLOCK + Math.ceil(dataBytes / BLOCK) * BLOCK;
}

/** The two zero blocks that end an archive. */
export const END_BYTES = 2 * BLOCK;

/** Splits a path into the ustar prefix/name fields, or null when it does not fit (no PAX headers here). */
export function ustarSplit(name: string): { prefix: string; name: string } | null {
  if (Buffer.byteLength(name) <= 100) return { prefix: '', name };
  for (let i = name.indexOf('/'); i !== -1; i = name.indexOf('/', i + 1)) {
    if (Buffer.byteLength(name.slice(0, i)) <= 155 && Buffer.byteLength(name.slice(i + 1)) <= 100 && i + 1 < name.length) {
      return { prefix: name.slice(0, i), name: name.slice(i + 1) };
    }
  }
  return null;
}

function writeOctal(header: Buffer, offset: number, length: number, value: number): void {
  header.write(`${value.toString(8).padStart(length - 1, '0')}\0`, offset, length, 'latin1');
}

function header(name: string, type: '0' | '5' | '2', mode: number, size: number, linkname = ''): Buffer {
  const split = ustarSplit(name);
  if (split === null) throw new FusionError('internal_error', `bundle path too long for ustar: ${name}`);
  if (Buffer.byteLength(linkname) > 100) throw new FusionError('internal_error', `bundle symlink target too long: ${name}`);
  const h = Buffer.alloc(BLOCK, 0);
  h.write(split.name, 0, 100, 'utf8');
  writeOctal(h, 100, 8, mode);
  writeOctal(h, 108, 8, 0);
  writeOctal(h, 116, 8, 0);
  writeOctal(h, 124, 12, size);
  writeOctal(h, 136, 12, 0);
  h.write(type, 156, 1, 'latin1');
  h.write(linkname, 157, 100, 'utf8');
  h.write('ustar\0', 257, 6, 'latin1');
  h.write('00', 263, 2, 'latin1');
  h.write(split.prefix, 345, 155, 'utf8');
  h.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'latin1');
  return h;
}

/** The archive path of an entry (directories end in `/`). */
export function archiveName(entry: BundleEntry): string {
  return entry.type === 'dir' ? `${entry.path}/` : entry.path;
}

/** Writes the entries (sorted here) as one deterministic ustar. */
export function writeBundleTar(entries: readonly BundleEntry[]): Buffer {
  // Byte order of the UTF-8 names, independent of locale (as the audit tarballs).
  const sorted = [...entries].sort((a, b) => Buffer.compare(Buffer.from(archiveName(a), 'utf8'), Buffer.from(archiveName(b), 'utf8')));
  const chunks: Buffer[] = [];
  for (const e of sorted) {
    if (e.type === 'dir') chunks.push(header(`${e.path}/`, '5', DIR_MODE, 0));
    else if (e.type === 'symlink') chunks.push(header(e.path, '2', LINK_MODE, 0, e.target));
    else {
      chunks.push(header(e.path, '0', e.executable ? EXEC_MODE : FILE_MODE, e.data.length), e.data);
      const pad = (BLOCK - (e.data.length % BLOCK)) % BLOCK;
      if (pad > 0) chunks.push(Buffer.alloc(pad, 0));
    }
  }
  chunks.push(Buffer.alloc(END_BYTES, 0));
  return Buffer.concat(chunks);
}

export interface ReadLimits {
  /** Sum of the files' sizes. */
  maxBytes: number;
  maxEntries: number;
}

function refuse(message: string): FusionError {
  return new FusionError('bundle_changed', `repository bundle refused: ${message}`);
}

function cString(buf: Buffer, start: number, length: number): string {
  const field = buf.subarray(start, start + length);
  const nul = field.indexOf(0);
  return field.subarray(0, nul === -1 ? field.length : nul).toString('utf8');
}

function readOctal(buf: Buffer, start: number, length: number): number | null {
  const text = buf.subarray(start, start + length).toString('latin1').replace(/[\0 ]+$/u, '');
  return /^[0-7]{1,12}$/u.test(text) ? parseInt(text, 8) : null;
}

/** A relative path of non-empty segments, none `.` or `..`. */
export function isSafeBundlePath(path: string): boolean {
  if (path === '' || path.startsWith('/') || path.includes('\0')) return false;
  return path.split('/').every((s) => s !== '' && s !== '.' && s !== '..');
}

/** Reads a bundle strictly (see the header comment); throws bundle_changed naming what is wrong. */
export function readBundleTar(tar: Buffer, limits: ReadLimits): BundleEntry[] {
  const entries: BundleEntry[] = [];
  const kinds = new Map<string, BundleEntry>();
  let offset = 0;
  let total = 0;
  for (;;) {
    if (offset + END_BYTES > tar.length) throw refuse('the archive is truncated (no end-of-archive blocks)');
    const h = tar.subarray(offset, offset + BLOCK);
    if (h.every((b) => b === 0)) {
      if (!tar.subarray(offset).every((b) => b === 0) || tar.length - offset !== END_BYTES) throw refuse('bytes follow the end-of-archive blocks');
      break;
    }
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i]!;
    if (readOctal(h, 148, 8) !== sum) throw refuse(`corrupt tar header at byte ${offset}`);
    if (h.toString('latin1', 257, 263) !== 'ustar\0' || h.toString('latin1', 263, 265) !== '00') throw refuse(`not a ustar header at byte ${offset}`);
    const prefix = cString(h, 345, 155);
    const rawName = cString(h, 0, 100);
    const name = prefix === '' ? rawName : `${prefix}/${rawName}`;
    const type = String.fromCharCode(h[156]!);
    const size = readOctal(h, 124, 12);
    if (size === null) throw refuse(`corrupt size of ${JSON.stringify(name)}`);
    const isDir = type === '5';
    const path = isDir && name.endsWith('/') ? name.slice(0, -1) : name;
    if (type !== '0' && type !== '5' && type !== '2') throw refuse(`${JSON.stringify(name)} has tar type ${JSON.stringify(type)} (only files, directories and symlinks)`);
    if (!isSafeBundlePath(path)) throw refuse(`unsafe path ${JSON.stringify(name)}`);
    if (kinds.has(path)) throw refuse(`${JSON.stringify(path)} appears twice`);
    const slash = path.lastIndexOf('/');
    if (slash !== -1 && kinds.get(path.slice(0, slash))?.type !== 'dir') throw refuse(`${JSON.stringify(path)} is not below a directory entry of the archive`);
    if (entries.length >= limits.maxEntries) throw refuse(`more than ${limits.maxEntries} entries`);
    const dataStart = offset + BLOCK;
    const end = dataStart + Math.ceil((type === '0' ? size : 0) / BLOCK) * BLOCK;
    if (type !== '0' && size !== 0) throw refuse(`${JSON.stringify(name)} carries data`);
    if (end > tar.length) throw refuse(`${JSON.stringify(name)} is truncated`);
    let entry: BundleEntry;
    if (type === '5') entry = { type: 'dir', path };
    else if (type === '2') {
      const target = cString(h, 157, 100);
      entry = { type: 'symlink', path, target };
    } else {
      total += size;
      if (total > limits.maxBytes) throw refuse(`its files exceed ${limits.maxBytes} bytes`);
      const mode = readOctal(h, 100, 8) ?? 0;
      entry = { type: 'file', path, executable: (mode & 0o111) !== 0, data: tar.subarray(dataStart, dataStart + size) };
    }
    kinds.set(path, entry);
    entries.push(entry);
    offset = end;
  }
  const lookup: LinkLookup = (p) => kinds.get(p);
  for (const e of entries) {
    if (e.type === 'symlink' && !resolvesInside(lookup, e.path, e.target)) throw refuse(`symlink ${JSON.stringify(e.path)} → ${JSON.stringify(e.target)} leaves the repository`);
  }
  return entries;
}
