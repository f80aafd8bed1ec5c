/**
 * Header checks and the capped body reader of the guarded fetch (docs/behaviour.md#e3 "Response").
 *
 * Order for a 2xx answer: media type → Content-Encoding → Content-Length → streamed body.
 * A body is refused with `unsupported_content_type` when it carries a Content-Encoding other
 * than `identity` (we sent `Accept-Encoding: identity`): decoding it would make the byte caps
 * meaningless (a small gzip can expand a thousandfold) and retrying cannot help, so the
 * non-retryable "we do not accept this representation" code fits better than network_error.
 */
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { FusionError } from '../errors.js';
import { ALLOWED_MEDIA_TYPES } from './constants.js';

export interface ContentType {
  /** Lowercase `type/subtype`. */
  mediaType: string;
  /** Lowercase charset label from the header, if any. */
  charset: string | undefined;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]+\/[!#$%&'*+.^_`|~0-9a-z-]+$/u;

/** One value of a header that must not disagree with itself when repeated. */
function single(value: string | string[] | undefined): string | undefined | null {
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value;
  const distinct = new Set(value.map((v) => v.trim()));
  return distinct.size === 1 ? [...distinct][0] : null;
}

/** Parses `type/subtype; charset=…`; undefined when absent or malformed. */
export function parseContentType(header: string): ContentType | undefined {
  const [typePart, ...params] = header.split(';');
  const mediaType = (typePart ?? '').trim().toLowerCase();
  if (!TOKEN.test(mediaType)) return undefined;
  let charset: string | undefined;
  for (const param of params) {
    const eq = param.indexOf('=');
    if (eq < 0) continue;
    if (param.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    let value = param.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    if (value !== '') charset = value.toLowerCase();
  }
  return { mediaType, charset };
}

function withStatus(status: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { http_status: status, ...extra };
}

function listTypes(types: ReadonlySet<string>): string {
  const all = [...types];
  return all.length <= 1 ? all.join('') : `${all.slice(0, -1).join(', ')} and ${all[all.length - 1] ?? ''}`;
}

/** The response's media type, or unsupported_content_type; `allowed` is the call's profile's list. */
export function checkMediaType(headers: IncomingHttpHeaders, status: number, allowed: ReadonlySet<string> = ALLOWED_MEDIA_TYPES): ContentType {
  const raw = single(headers['content-type']);
  const parsed = typeof raw === 'string' ? parseContentType(raw) : undefined;
  if (parsed === undefined || !allowed.has(parsed.mediaType)) {
    const shown = raw === undefined ? 'no Content-Type' : raw === null ? 'conflicting Content-Type headers' : `Content-Type ${JSON.stringify(raw.slice(0, 100))}`;
    throw new FusionError('unsupported_content_type', `unsupported content type: ${shown}; only ${listTypes(allowed)} are fetched`, {
      details: withStatus(status, { content_type: parsed?.mediaType ?? null }),
    });
  }
  return parsed;
}

/** Refuses any Content-Encoding but identity (we asked for identity). */
export function checkContentEncoding(headers: IncomingHttpHeaders, status: number): void {
  const raw = headers['content-encoding'];
  const values = (raw === undefined ? [] : Array.isArray(raw) ? raw : [raw])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim().toLowerCase())
    .filter((v) => v !== '');
  const encoded = values.filter((v) => v !== 'identity');
  if (encoded.length > 0) {
    throw new FusionError('unsupported_content_type', `compressed response refused: Content-Encoding ${encoded.join(', ')} (the request asked for identity)`, {
      details: withStatus(status, { content_encoding: encoded.join(', ') }),
    });
  }
}

/** The declared length, or undefined; malformed → network_error, over the cap → response_too_large. */
export function checkContentLength(headers: IncomingHttpHeaders, maxBytes: number, status: number): number | undefined {
  const raw = single(headers['content-length']);
  if (raw === undefined) return undefined;
  if (raw === null || !/^\d+$/u.test(raw.trim())) {
    throw new FusionError('network_error', 'malformed Content-Length header', { details: withStatus(status) });
  }
  const declared = Number(raw.trim());
  if (declared > maxBytes) {
    throw new FusionError('response_too_large', `response declares ${raw.trim()} bytes, over the ${String(maxBytes)}-byte cap`, {
      details: withStatus(status, { content_length: declared, max_bytes: maxBytes }),
    });
  }
  return declared;
}

export interface CappedBody {
  /** The raw body in its own ArrayBuffer (transferable to the extraction worker). */
  bytes: Uint8Array;
  sha256: string;
  /** Only with overflow `cut-at-line`: the body went past the cap and was cut. */
  cut?: boolean;
}

/** The bytes up to and including the last line feed of `buffer` (none when it has no line feed). */
function cutAtLine(buffer: Buffer): Buffer {
  const lastFeed = buffer.lastIndexOf(0x0a);
  return lastFeed < 0 ? buffer.subarray(0, 0) : buffer.subarray(0, lastFeed + 1);
}

/**
 * Streams the body, hashing as it goes. Past the cap: `fail` throws response_too_large;
 * `cut-at-line` stops reading and keeps what came before the last line feed within the cap.
 */
export async function readCappedBody(body: AsyncIterable<unknown>, maxBytes: number, status: number, overflow: 'fail' | 'cut-at-line' = 'fail'): Promise<CappedBody> {
  const hash = createHash('sha256');
  const chunks: Buffer[] = [];
  let size = 0;
  let cut = false;
  for await (const chunk of body) {
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
    if (size + buffer.length > maxBytes && overflow === 'cut-at-line') {
      // Leaving the loop destroys the stream: nothing more is read from the socket.
      chunks.push(buffer.subarray(0, maxBytes - size));
      cut = true;
      break;
    }
    size += buffer.length;
    if (size > maxBytes) {
      // Leaving the loop destroys the stream: nothing more is read from the socket.
      throw new FusionError('response_too_large', `response body exceeds the ${String(maxBytes)}-byte cap`, {
        details: withStatus(status, { max_bytes: maxBytes }),
      });
    }
    hash.update(buffer);
    chunks.push(buffer);
  }
  if (cut) {
    const kept = cutAtLine(Buffer.concat(chunks));
    const bytes = new Uint8Array(kept.length);
    bytes.set(kept);
    return { bytes, sha256: createHash('sha256').update(kept).digest('hex'), cut: true };
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const buffer of chunks) {
    bytes.set(buffer, offset);
    offset += buffer.length;
  }
  return { bytes, sha256: hash.digest('hex') };
}
