/**
 * HTTP/1.1 to the daemon: over its Unix socket (every route) or over a TCP base URL (the
 * research API only: the task API is never served on TCP). Replies are JSON; event streams are
 * NDJSON. Error envelopes become FusionError with the daemon's code.
 */
import { request as httpRequest, type ClientRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import { FusionError, isErrorCode } from '../errors.js';
import { deniedMessage } from './socket-denied.js';

export interface ApiReply {
  status: number;
  body: unknown;
}

/** Where requests go: a Unix socket path, or an http(s) base URL. */
export type Endpoint = { socketPath: string } | { baseUrl: URL };

export const DEFAULT_REQUEST_TIMEOUT_MS = 15 * 60_000;

const guarded = new WeakSet<Socket>();
function guardSocket(socket: Socket): void {
  if (guarded.has(socket)) return;
  guarded.add(socket);
  // The daemon may close right after replying while a large body is still being written:
  // that EPIPE belongs to this request (already answered or failed), not to the process.
  socket.on('error', () => undefined);
}

export function describeEndpoint(endpoint: Endpoint): string {
  return 'socketPath' in endpoint ? endpoint.socketPath : endpoint.baseUrl.href;
}

function requestOptions(endpoint: Endpoint, method: string, path: string, headers: Record<string, string | number>): RequestOptions {
  if ('socketPath' in endpoint) return { socketPath: endpoint.socketPath, method, path, headers };
  const base = endpoint.baseUrl;
  const prefix = base.pathname.replace(/\/+$/u, '');
  return { protocol: base.protocol, hostname: base.hostname.replace(/^\[|\]$/gu, ''), port: base.port || undefined, method, path: `${prefix}${path}`, headers };
}

function send(endpoint: Endpoint, options: RequestOptions, onResponse: (res: IncomingMessage) => void): ClientRequest {
  const https = 'baseUrl' in endpoint && endpoint.baseUrl.protocol === 'https:';
  return (https ? httpsRequest : httpRequest)(options, onResponse);
}

function unavailable(endpoint: Endpoint, err: NodeJS.ErrnoException): FusionError {
  const where = describeEndpoint(endpoint);
  // Only the task-submitting commands can run an embedded daemon (--wait): they say so themselves.
  const hint = 'socketPath' in endpoint ? "; start one with 'fusion daemon'" : '';
  return new FusionError('daemon_unavailable', `no fusion daemon answers on ${where}${hint}`, { cause: err });
}

/**
 * A socket this user may not open: a daemon runs there, for its user and its --socket-group
 * only (docs/operations.md#agent-accounts). Not "no daemon": starting another would not help.
 */
function denied(endpoint: Endpoint, err: NodeJS.ErrnoException): FusionError | undefined {
  if (!('socketPath' in endpoint) || (err.code !== 'EACCES' && err.code !== 'EPERM')) return undefined;
  return new FusionError('forbidden', deniedMessage(endpoint.socketPath), { cause: err, details: { socket: endpoint.socketPath } });
}

/** The typed error of a failed connection, or the error itself. */
function connectionError(endpoint: Endpoint, err: NodeJS.ErrnoException): Error {
  if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') return unavailable(endpoint, err);
  return denied(endpoint, err) ?? err;
}

function parseBody(text: string): unknown {
  try {
    return text === '' ? null : (JSON.parse(text) as unknown);
  } catch {
    return text;
  }
}

/** One request; resolves with the status and the parsed body (any status). */
export async function rawRequest(endpoint: Endpoint, method: string, path: string, body?: unknown, timeoutMs = DEFAULT_REQUEST_TIMEOUT_MS, headers: Record<string, string> = {}): Promise<ApiReply> {
  const reply = await bytesRequest(endpoint, method, path, body, timeoutMs, headers);
  return { status: reply.status, body: parseBody(reply.bytes.toString('utf8')) };
}

/** A reply as bytes (the answer route sends Markdown, not JSON). */
export interface BytesReply {
  status: number;
  headers: IncomingMessage['headers'];
  bytes: Buffer;
}

/** One request; resolves with the status, headers and the body's bytes (any status). */
export function bytesRequest(endpoint: Endpoint, method: string, path: string, body?: unknown, timeoutMs = DEFAULT_REQUEST_TIMEOUT_MS, headers: Record<string, string> = {}): Promise<BytesReply> {
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  const allHeaders: Record<string, string | number> = { ...headers, ...(payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {}) };
  return new Promise((resolve, reject) => {
    const req = send(endpoint, { ...requestOptions(endpoint, method, path, allHeaders), timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('socket', guardSocket);
    req.on('timeout', () => req.destroy(new Error(`request to the daemon timed out after ${timeoutMs} ms`)));
    req.on('error', (err: NodeJS.ErrnoException) => reject(connectionError(endpoint, err)));
    if (payload) req.write(payload);
    req.end();
  });
}

/** An error reply's body, parsed (JSON envelope) for envelopeError. */
export function errorReply(reply: BytesReply): ApiReply {
  return { status: reply.status, body: parseBody(reply.bytes.toString('utf8')) };
}

/** The daemon's error envelope as a FusionError (unknown codes become internal_error). */
export function envelopeError(reply: ApiReply): FusionError {
  const env = reply.body as { error?: { code?: string; message?: string; details?: Record<string, unknown> } } | null;
  const code = env?.error?.code;
  const message = env?.error?.message ?? `daemon answered HTTP ${reply.status}`;
  return new FusionError(code && isErrorCode(code) ? code : 'internal_error', message, { details: env?.error?.details ?? {} });
}

/**
 * An NDJSON stream as an async iterator of parsed lines. Ends when the daemon ends the stream
 * or `signal` aborts (an abort ends the iteration quietly; it is how a caller stops following).
 */
export async function* ndjson(endpoint: Endpoint, path: string, signal?: AbortSignal, headers: Record<string, string> = {}): AsyncGenerator<Record<string, unknown>> {
  if (signal?.aborted) return;
  const local = new AbortController();
  const onAbort = (): void => local.abort();
  signal?.addEventListener('abort', onAbort, { once: true });
  const queue: Array<Record<string, unknown>> = [];
  let done = false;
  let failure: unknown;
  let wake: (() => void) | undefined;
  const notify = (): void => {
    wake?.();
    wake = undefined;
  };
  const finish = (err?: unknown): void => {
    if (done) return;
    done = true;
    failure = err;
    notify();
  };
  const req = send(endpoint, { ...requestOptions(endpoint, 'GET', path, headers), signal: local.signal }, (res) => {
    if ((res.statusCode ?? 0) >= 400) {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => finish(envelopeError({ status: res.statusCode ?? 0, body: parseBody(Buffer.concat(chunks).toString('utf8')) })));
      return;
    }
    let buffered = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      buffered += chunk;
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (line.trim() === '') continue;
        try {
          queue.push(JSON.parse(line) as Record<string, unknown>);
        } catch (err) {
          finish(new FusionError('internal_error', `the daemon sent a malformed event line: ${(err as Error).message}`));
          return;
        }
      }
      notify();
    });
    res.on('end', () => finish());
    res.on('error', (err: Error) => finish(err.name === 'AbortError' ? undefined : err));
  });
  req.on('socket', guardSocket);
  req.on('error', (err: NodeJS.ErrnoException) => {
    if (err.name === 'AbortError') finish();
    else finish(connectionError(endpoint, err));
  });
  req.end();
  try {
    for (;;) {
      while (queue.length > 0) yield queue.shift()!;
      if (done) break;
      await new Promise<void>((resolve) => (wake = resolve));
    }
    while (queue.length > 0) yield queue.shift()!;
    if (failure !== undefined) throw failure;
  } finally {
    signal?.removeEventListener('abort', onAbort);
    // A consumer that stops early (break, return) closes the stream.
    local.abort();
  }
}
