/**
 * Header checks and the capped body reader of the guarded fetch (SPEC §E3 "Response").
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

/** The response's media type, or unsupported_content_type. */
export function checkMediaType(headers: IncomingHttpHeaders, status: number): ContentType {
  const raw = single(headers['content-type']);
  const parsed = typeof raw === 'string' ? parseContentType(raw) : undefined;
  if (parsed === undefined || !ALLOWED_MEDIA_TYPES.has(parsed.mediaType)) {
    const shown = raw === undefined ? 'no Content-Type' : raw === null ? 'conflicting Content-Type headers' : `Content-Type ${JSON.stringify(raw.slice(0, 100))}`;
    throw new FusionError('unsupported_content_type', `unsupported content type: ${shown}; only text/html, application/xhtml+xml, text/plain and text/markdown are fetched`, {
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
}

/** Streams the body, hashing as it goes; stops and throws response_too_large past the cap. */
export async function readCappedBody(body: AsyncIterable<unknown>, maxBytes: number, status: number): Promise<CappedBody> {
  const hash = createHash('sha256');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
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
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const buffer of chunks) {
    bytes.set(buffer, offset);
    offset += buffer.length;
  }
  return { bytes, sha256: hash.digest('hex') };
}
