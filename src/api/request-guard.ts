/**
 * The socket API's strict HTTP: what Node would answer in plain text (bad request
 * lines, oversized headers, timeouts) is answered in the one JSON error envelope, and requests
 * are checked before any route sees them: URL length, and a JSON media type for every body.
 */
import { STATUS_CODES, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { FusionError } from '../errors.js';

/** Request line + headers; Node refuses more with HPE_HEADER_OVERFLOW (answered as 431). */
export const MAX_HEADER_BYTES = 16 * 1024;
export const MAX_URL_BYTES = 8 * 1024;
/**
 * Headers must arrive within this; a whole request body within REQUEST_TIMEOUT_MS (answered as
 * 408, then the connection is destroyed). Both surfaces (Unix socket, TCP) use the same
 * deadlines. They bound receiving the request only: an event stream or a `wait` whose request
 * arrived is answered for as long as it takes.
 */
export const HEADERS_TIMEOUT_MS = 10_000;
export const REQUEST_TIMEOUT_MS = 30_000;

/** How long a refusal may take to flush before its connection is destroyed anyway. */
const ANSWER_FLUSH_MS = 1_000;

export const STRICT_SERVER_OPTIONS = {
  maxHeaderSize: MAX_HEADER_BYTES,
  headersTimeout: HEADERS_TIMEOUT_MS,
  requestTimeout: REQUEST_TIMEOUT_MS,
  // How often Node checks those two deadlines (its default, 30 s, would triple the headers one).
  connectionsCheckingInterval: 1_000,
  // Over a Unix socket the Host header names nothing; Node's own refusal would not be JSON.
  requireHostHeader: false,
} as const;

/** Maps a Node parser/timeout error to the envelope's code. */
export function clientErrorOf(err: Error & { code?: string }): FusionError {
  const code = err.code ?? '';
  if (code === 'HPE_HEADER_OVERFLOW') return new FusionError('headers_too_large', `request line and headers exceed ${MAX_HEADER_BYTES} bytes`, { details: { maxBytes: MAX_HEADER_BYTES } });
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT' || code === 'ERR_HTTP_HEADERS_TIMEOUT') return new FusionError('client_timeout', 'the request was not received in time; the connection is closed');
  // Parser messages name the problem ("Invalid method encountered"), never the request's bytes.
  return new FusionError('bad_request', `malformed HTTP request (${code || 'parse error'}: ${err.message.slice(0, 120)}); the connection is closed`, { details: { reason: code } });
}

/** Answers Node-level errors with the JSON envelope instead of Node's plain replies. */
export function installClientErrorEnvelope(server: Server): void {
  server.on('clientError', (err: Error & { code?: string }, socket: Duplex) => {
    // A peer that reset or already half-closed cannot read an answer.
    if (err.code === 'ECONNRESET' || err.code === 'EPIPE' || !socket.writable) {
      socket.destroy();
      return;
    }
    answerAndClose(socket, clientErrorOf(err));
  });
}

/**
 * Writes one JSON error reply on a raw connection (before or instead of Node's HTTP handling) and
 * destroys it once the reply is flushed. Not a half-close: a peer that never closes its own side
 * would keep a half-closed connection, and its slot, for as long as it likes.
 */
export function answerAndClose(socket: Duplex, fe: FusionError): void {
  const body = JSON.stringify(fe.toEnvelope());
  const retryAfter = fe.details.retryAfterSeconds;
  // A peer that does not read cannot hold the connection by leaving the reply unflushed.
  const deadline = setTimeout(() => socket.destroy(), ANSWER_FLUSH_MS);
  deadline.unref();
  socket.once('close', () => clearTimeout(deadline));
  socket.end(
    `HTTP/1.1 ${fe.httpStatus} ${STATUS_CODES[fe.httpStatus] ?? 'Error'}\r\n` +
      'content-type: application/json; charset=utf-8\r\n' +
      `content-length: ${Buffer.byteLength(body)}\r\n` +
      (typeof retryAfter === 'number' ? `retry-after: ${retryAfter}\r\n` : '') +
      'connection: close\r\n\r\n' +
      body,
    () => socket.destroy(),
  );
}

/** Throws for what no route should see: an over-long URL, a body that is not declared JSON. */
export function assertStrictRequest(req: IncomingMessage): void {
  if (Buffer.byteLength(req.url ?? '') > MAX_URL_BYTES) {
    throw new FusionError('uri_too_long', `request URL exceeds ${MAX_URL_BYTES} bytes`, { details: { maxBytes: MAX_URL_BYTES } });
  }
  const length = req.headers['content-length'];
  const hasBody = req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
  if (!hasBody) return;
  const type = req.headers['content-type'];
  const [media = '', ...params] = (type ?? '').split(';').map((p) => p.trim().toLowerCase());
  const charset = params.find((p) => p.startsWith('charset='))?.slice('charset='.length).replace(/"/g, '');
  if (media !== 'application/json' || (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')) {
    throw new FusionError('unsupported_media_type', `a request body must be sent with Content-Type: application/json (UTF-8), got ${type === undefined ? 'none' : JSON.stringify(type.slice(0, 100))}`, {
      details: { field: 'content-type' },
    });
  }
}
