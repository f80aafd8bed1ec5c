/**
 * The one ustar codec: header encoding and decoding for every tar this project writes or reads
 * (attempt and task tarballs in audit/, repository bundles in bundles/). What each archive may
 * hold, and the exact messages it refuses with, are its owner's rules; the bytes of a header
 * are this file's.
 *
 * Two numeric-field layouts exist, and each is kept exactly so that digests recorded under it
 * still verify:
 * - `space`: octal digits then a space (`000600 \0`, size `00000001750 `, checksum `006511 \0`),
 *   device fields filled. The audit tarballs were first written by tar-fs, whose headers look
 *   like this; every sealed attempt and task tarball digest is over these bytes.
 * - `nul`: octal digits then a NUL (`0000644\0`, checksum `006511\0 `), device fields left zero.
 *   The repository bundle format, whose sha256 is a bundle's content address.
 *
 * No PAX or GNU extension headers are ever written: a name must fit the plain ustar name and
 * prefix fields (`ustarSplit`). Node builtins only (src/common/).
 */

export const BLOCK = 512;
/** The two zero blocks that end an archive. */
export const END_BYTES = 2 * BLOCK;

export type NumericStyle = 'space' | 'nul';

/** Tar type flags this project writes or accepts. */
export const TYPE_FLAG = { file: '0', dir: '5', symlink: '2' } as const;

export interface HeaderFields {
  name: string;
  type: keyof typeof TYPE_FLAG;
  mode: number;
  size: number;
  /** A symlink's target. */
  linkname?: string;
}

export interface DecodedHeader {
  /** prefix + `/` + name, or name alone. */
  name: string;
  /** The type flag as read (`'0'`, `'\0'`, `'5'`, …). */
  typeFlag: string;
  /** null when the field is not octal. */
  mode: number | null;
  size: number | null;
  linkname: string;
  /** Whether the stored checksum equals the header's sum. */
  checksumOk: boolean;
  /** Whether the magic and version read `ustar\0` `00`. */
  ustar: boolean;
}

/** Bytes an entry takes in the archive (header + data padded to whole blocks). */
export function entryArchiveBytes(dataBytes: number): number {
  return BLOCK + paddedSize(dataBytes);
}

/** The data size rounded up to whole blocks. */
export function paddedSize(dataBytes: number): number {
  return Math.ceil(dataBytes / BLOCK) * BLOCK;
}

/** The zero bytes that pad `dataBytes` of data to a whole block. */
export function padding(dataBytes: number): Buffer {
  return Buffer.alloc((BLOCK - (dataBytes % BLOCK)) % BLOCK, 0);
}

/** Byte order of the UTF-8 names, independent of locale: the order every archive is written in. */
export function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/**
 * Splits a path into the ustar prefix/name fields (the shortest prefix that lets the name fit),
 * or null when it does not fit (no PAX headers here).
 */
export function ustarSplit(name: string): { prefix: string; name: string } | null {
  if (Buffer.byteLength(name) <= 100) return { prefix: '', name };
  for (let i = name.indexOf('/'); i !== -1; i = name.indexOf('/', i + 1)) {
    if (Buffer.byteLength(name.slice(0, i)) <= 155 && Buffer.byteLength(name.slice(i + 1)) <= 100 && i + 1 < name.length) {
      return { prefix: name.slice(0, i), name: name.slice(i + 1) };
    }
  }
  return null;
}

/** Thrown for a header that cannot be encoded; the caller turns it into its own error. */
export class UstarEncodeError extends Error {
  override readonly name = 'UstarEncodeError';
}

function writeOctal(h: Buffer, offset: number, length: number, value: number, style: NumericStyle): void {
  // `space`: length-2 digits, a space, the field's last byte left NUL (the size and mtime fields,
  // 12 bytes, hold 11 digits and the space). `nul`: length-1 digits and a NUL.
  const text = style === 'space'
    ? `${value.toString(8).padStart(length === 12 ? 11 : length - 2, '0')} `
    : `${value.toString(8).padStart(length - 1, '0')}\0`;
  if (text.length > length) throw new UstarEncodeError(`value ${value} does not fit a ${length}-byte tar field`);
  h.write(text, offset, length, 'latin1');
}

/** One 512-byte header: mtime 0, uid/gid 0, no user or group names. */
export function encodeHeader(fields: HeaderFields, style: NumericStyle): Buffer {
  const split = ustarSplit(fields.name);
  if (split === null) throw new UstarEncodeError(`path too long for ustar: ${fields.name}`);
  const linkname = fields.linkname ?? '';
  if (Buffer.byteLength(linkname) > 100) throw new UstarEncodeError(`symlink target too long: ${fields.name}`);
  const h = Buffer.alloc(BLOCK, 0);
  h.write(split.name, 0, 100, 'utf8');
  writeOctal(h, 100, 8, fields.mode, style);
  writeOctal(h, 108, 8, 0, style);
  writeOctal(h, 116, 8, 0, style);
  writeOctal(h, 124, 12, fields.size, style);
  writeOctal(h, 136, 12, 0, style);
  h.write(TYPE_FLAG[fields.type], 156, 1, 'latin1');
  h.write(linkname, 157, 100, 'utf8');
  h.write('ustar\0', 257, 6, 'latin1');
  h.write('00', 263, 2, 'latin1');
  if (style === 'space') {
    writeOctal(h, 329, 8, 0, style);
    writeOctal(h, 337, 8, 0, style);
  }
  h.write(split.prefix, 345, 155, 'utf8');
  h.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  h.fill(0, 148, 156);
  h.write(style === 'space' ? `${sum.toString(8).padStart(6, '0')} ` : `${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'latin1');
  return h;
}

/** The header, data and padding of one regular file. */
export function fileEntry(name: string, mode: number, data: Buffer, style: NumericStyle): Buffer[] {
  const chunks = [encodeHeader({ name, type: 'file', mode, size: data.length }, style)];
  if (data.length > 0) chunks.push(data);
  const pad = padding(data.length);
  if (pad.length > 0) chunks.push(pad);
  return chunks;
}

export function endOfArchive(): Buffer {
  return Buffer.alloc(END_BYTES, 0);
}

function cString(buf: Buffer, start: number, length: number): string {
  const field = buf.subarray(start, start + length);
  const nul = field.indexOf(0);
  return field.subarray(0, nul === -1 ? field.length : nul).toString('utf8');
}

/** An octal field (digits, then NULs or spaces), or null. */
export function readOctal(buf: Buffer, start: number, length: number): number | null {
  const text = buf.subarray(start, start + length).toString('latin1').replace(/[\0 ]+$/u, '');
  return /^[0-7]{1,12}$/u.test(text) ? parseInt(text, 8) : null;
}

export function isZeroBlock(block: Buffer): boolean {
  for (const b of block) if (b !== 0) return false;
  return true;
}

/** Reads one 512-byte header block; judging it is the caller's (see DecodedHeader). */
export function decodeHeader(h: Buffer): DecodedHeader {
  const prefix = cString(h, 345, 155);
  const rawName = cString(h, 0, 100);
  let sum = 0;
  for (let i = 0; i < BLOCK; i += 1) sum += i >= 148 && i < 156 ? 0x20 : h[i]!;
  return {
    name: prefix === '' ? rawName : `${prefix}/${rawName}`,
    typeFlag: String.fromCharCode(h[156]!),
    mode: readOctal(h, 100, 8),
    size: readOctal(h, 124, 12),
    linkname: cString(h, 157, 100),
    checksumOk: readOctal(h, 148, 8) === sum,
    ustar: h.toString('latin1', 257, 263) === 'ustar\0' && h.toString('latin1', 263, 265) === '00',
  };
}
