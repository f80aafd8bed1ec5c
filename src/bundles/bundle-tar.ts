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
import { byteOrder, BLOCK, decodeHeader, encodeHeader, END_BYTES, endOfArchive, isZeroBlock, padding, paddedSize, UstarEncodeError, type HeaderFields } from '../common/ustar.js';
import { resolvesInside, type LinkLookup } from './symlink-paths.js';

export type BundleEntry =
  | { type: 'dir'; path: string }
  | { type: 'file'; path: string; executable: boolean; data: Buffer }
  | { type: 'symlink'; path: string; target: string };

const DIR_MODE = 0o755;
const FILE_MODE = 0o644;
const EXEC_MODE = 0o755;
const LINK_MODE = 0o777;

function header(fields: HeaderFields): Buffer {
  try {
    return encodeHeader(fields, 'nul');
  } catch (err) {
    if (err instanceof UstarEncodeError) throw new FusionError('internal_error', `bundle ${err.message}`);
    throw err;
  }
}

/** The archive path of an entry (directories end in `/`). */
export function archiveName(entry: BundleEntry): string {
  return entry.type === 'dir' ? `${entry.path}/` : entry.path;
}

/** Writes the entries (sorted here) as one deterministic ustar. */
export function writeBundleTar(entries: readonly BundleEntry[]): Buffer {
  // Byte order of the UTF-8 names, independent of locale (as the audit tarballs).
  const sorted = [...entries].sort((a, b) => byteOrder(archiveName(a), archiveName(b)));
  const chunks: Buffer[] = [];
  for (const e of sorted) {
    if (e.type === 'dir') chunks.push(header({ name: `${e.path}/`, type: 'dir', mode: DIR_MODE, size: 0 }));
    else if (e.type === 'symlink') chunks.push(header({ name: e.path, type: 'symlink', mode: LINK_MODE, size: 0, linkname: e.target }));
    else chunks.push(header({ name: e.path, type: 'file', mode: e.executable ? EXEC_MODE : FILE_MODE, size: e.data.length }), e.data, padding(e.data.length));
  }
  chunks.push(endOfArchive());
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
    if (isZeroBlock(h)) {
      if (!tar.subarray(offset).every((b) => b === 0) || tar.length - offset !== END_BYTES) throw refuse('bytes follow the end-of-archive blocks');
      break;
    }
    const d = decodeHeader(h);
    if (!d.checksumOk) throw refuse(`corrupt tar header at byte ${offset}`);
    if (!d.ustar) throw refuse(`not a ustar header at byte ${offset}`);
    const { name, typeFlag: type, size } = d;
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
    const end = dataStart + paddedSize(type === '0' ? size : 0);
    if (type !== '0' && size !== 0) throw refuse(`${JSON.stringify(name)} carries data`);
    if (end > tar.length) throw refuse(`${JSON.stringify(name)} is truncated`);
    let entry: BundleEntry;
    if (type === '5') entry = { type: 'dir', path };
    else if (type === '2') {
      entry = { type: 'symlink', path, target: d.linkname };
    } else {
      total += size;
      if (total > limits.maxBytes) throw refuse(`its files exceed ${limits.maxBytes} bytes`);
      const mode = d.mode ?? 0;
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
