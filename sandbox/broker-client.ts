/**
 * The child's only channel out: HTTP/1.1 + JSON over the broker's Unix socket (docs/behaviour.md#b10,
 * `src/contracts/broker-protocol.ts`). Runs INSIDE the sandbox: node builtins only.
 *
 * Every request has its own deadline and an optional abort signal; a broker error envelope
 * `{error:{code,message,details}}` becomes a `BrokerRequestError` carrying the broker's `code`.
 * No keep-alive agent: each call is one short connection, so nothing keeps the process alive
 * after the agent settles.
 */
import { request as httpRequest } from 'node:http';
import type { ErrorCode } from '../src/common/error-codes.js';
import type {
  FetchRequest,
  FetchResponse,
  ModelTurnRequest,
  ModelTurnResponse,
} from '../src/contracts/broker-protocol.js';

/** A model turn can take minutes on a slow provider; the broker has its own retries. */
export const DEFAULT_MODEL_TIMEOUT_MS = 10 * 60_000;
/** The guarded fetch has one 90 s deadline (docs/behaviour.md#e3); leave room for the broker's overhead. */
export const DEFAULT_FETCH_TIMEOUT_MS = 120_000;
/** Responses bigger than this are refused (a model reply or one 32 KiB fetch result is far smaller). */
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/** Codes produced by the client itself (the broker's own codes pass through unchanged). */
export const BROKER_CLIENT_CODES = {
  unavailable: 'broker_unavailable',
  timeout: 'broker_timeout',
  aborted: 'cancelled',
  protocol: 'broker_protocol_error',
} as const satisfies Record<string, ErrorCode>;

export class BrokerRequestError extends Error {
  override readonly name = 'BrokerRequestError';
  readonly code: string;
  /** HTTP status of the broker's answer, when there was one. */
  readonly httpStatus: number | undefined;
  readonly details: Record<string, unknown>;

  constructor(code: string, message: string, options: { httpStatus?: number; details?: Record<string, unknown>; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.httpStatus = options.httpStatus;
    this.details = options.details ?? {};
  }
}

export interface BrokerClientOptions {
  socketPath: string;
  modelTimeoutMs?: number;
  fetchTimeoutMs?: number;
  maxResponseBytes?: number;
}

/** What the agent loop needs from a broker; tests may pass any implementation. */
export interface BrokerClient {
  modelTurn(req: ModelTurnRequest, signal?: AbortSignal): Promise<ModelTurnResponse>;
  fetch(req: FetchRequest, signal?: AbortSignal): Promise<FetchResponse>;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function protocolError(what: string): BrokerRequestError {
  return new BrokerRequestError(BROKER_CLIENT_CODES.protocol, `broker answered with an invalid body: ${what}`);
}

function envelopeError(status: number, body: unknown): BrokerRequestError {
  const error = isRecord(body) ? body.error : undefined;
  if (isRecord(error) && typeof error.code === 'string' && typeof error.message === 'string') {
    const details = isRecord(error.details) ? error.details : {};
    return new BrokerRequestError(error.code, error.message, { httpStatus: status, details });
  }
  return new BrokerRequestError(BROKER_CLIENT_CODES.protocol, `broker answered HTTP ${String(status)} without an error envelope`, {
    httpStatus: status,
  });
}

function checkToolCalls(value: unknown): boolean {
  return (
    Array.isArray(value) &&
    value.every((c) => isRecord(c) && typeof c.id === 'string' && typeof c.name === 'string' && typeof c.arguments === 'string')
  );
}

/** Shape check of a model turn answer; the broker is trusted, but a bad body must not crash the loop. */
export function parseModelTurnResponse(body: unknown): ModelTurnResponse {
  if (!isRecord(body)) throw protocolError('model turn is not an object');
  const message = body.message;
  if (!isRecord(message) || message.role !== 'assistant' || typeof message.content !== 'string' || !checkToolCalls(message.tool_calls)) {
    throw protocolError('model turn message is malformed');
  }
  const stop = body.stop_reason;
  if (stop !== 'stop' && stop !== 'tool_calls' && stop !== 'length' && stop !== 'refusal') throw protocolError('unknown stop_reason');
  const usage = body.usage;
  if (!isRecord(usage) || typeof usage.input_tokens !== 'number' || typeof usage.output_tokens !== 'number') {
    throw protocolError('model turn usage is malformed');
  }
  return body as unknown as ModelTurnResponse;
}

/** Shape check of a fetch answer (success carries the provenance the sealed log needs). */
export function parseFetchResponse(body: unknown): FetchResponse {
  if (!isRecord(body)) throw protocolError('fetch answer is not an object');
  if (body.ok === true) {
    const r = body.result;
    if (
      !isRecord(r) ||
      typeof r.url !== 'string' ||
      typeof r.final_url !== 'string' ||
      typeof r.status !== 'number' ||
      typeof r.content_type !== 'string' ||
      (r.format !== 'text' && r.format !== 'markdown') ||
      typeof r.truncated !== 'boolean' ||
      typeof r.content !== 'string' ||
      typeof r.response_bytes !== 'number' ||
      typeof r.content_sha256 !== 'string'
    ) {
      throw protocolError('fetch result is malformed');
    }
    return body as unknown as FetchResponse;
  }
  if (body.ok === false) {
    const e = body.error;
    if (!isRecord(e) || typeof e.code !== 'string' || typeof e.message !== 'string') throw protocolError('fetch error is malformed');
    if (e.http_status !== undefined && typeof e.http_status !== 'number') throw protocolError('fetch error http_status is malformed');
    return body as unknown as FetchResponse;
  }
  throw protocolError('fetch answer has no ok flag');
}

interface PostOptions {
  socketPath: string;
  path: string;
  body: unknown;
  timeoutMs: number;
  maxResponseBytes: number;
  signal: AbortSignal | undefined;
}

/** One POST with a JSON body; resolves with the parsed JSON of a 2xx answer. */
function postJson(options: PostOptions): Promise<unknown> {
  return new Promise((resolve, reject) => {
    if (options.signal?.aborted === true) {
      reject(new BrokerRequestError(BROKER_CLIENT_CODES.aborted, 'broker request aborted'));
      return;
    }
    const payload = Buffer.from(JSON.stringify(options.body), 'utf8');
    let settled = false;
    const finish = (err: Error | undefined, value?: unknown): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      if (err !== undefined) reject(err);
      else resolve(value);
    };

    const req = httpRequest({
      socketPath: options.socketPath,
      path: options.path,
      method: 'POST',
      agent: false,
      headers: {
        host: 'broker',
        'content-type': 'application/json',
        'content-length': String(payload.length),
        connection: 'close',
      },
    });
    const timer = setTimeout(() => {
      const err = new BrokerRequestError(BROKER_CLIENT_CODES.timeout, `broker request ${options.path} timed out after ${String(options.timeoutMs)} ms`);
      finish(err);
      req.destroy(err);
    }, options.timeoutMs);
    const onAbort = (): void => {
      const err = new BrokerRequestError(BROKER_CLIENT_CODES.aborted, 'broker request aborted');
      finish(err);
      req.destroy(err);
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });

    req.on('error', (err) => {
      finish(new BrokerRequestError(BROKER_CLIENT_CODES.unavailable, `broker request ${options.path} failed: ${err.message}`, { cause: err }));
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes > options.maxResponseBytes) {
          const err = protocolError(`response exceeds ${String(options.maxResponseBytes)} bytes`);
          finish(err);
          req.destroy(err);
          return;
        }
        chunks.push(chunk);
      });
      res.on('error', (err) => {
        finish(new BrokerRequestError(BROKER_CLIENT_CODES.unavailable, `broker response ${options.path} failed: ${err.message}`, { cause: err }));
      });
      res.on('end', () => {
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          finish(protocolError(`HTTP ${String(res.statusCode ?? 0)} body is not JSON`));
          return;
        }
        const status = res.statusCode ?? 0;
        if (status < 200 || status > 299) finish(envelopeError(status, body));
        else finish(undefined, body);
      });
    });
    req.end(payload);
  });
}

export function createBrokerClient(options: BrokerClientOptions): BrokerClient {
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  return {
    async modelTurn(req, signal) {
      const body = await postJson({
        socketPath: options.socketPath,
        path: '/v1/model',
        body: req,
        timeoutMs: options.modelTimeoutMs ?? DEFAULT_MODEL_TIMEOUT_MS,
        maxResponseBytes,
        signal,
      });
      return parseModelTurnResponse(body);
    },
    async fetch(req, signal) {
      const body = await postJson({
        socketPath: options.socketPath,
        path: '/v1/fetch',
        body: req,
        timeoutMs: options.fetchTimeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS,
        maxResponseBytes,
        signal,
      });
      return parseFetchResponse(body);
    },
  };
}
