/**
 * The per-child broker (docs/architecture.md#processes): HTTP/1.1 + JSON over one Unix socket, the child's
 * only channel out of its sandbox.
 *
 *   POST /v1/model  → provider.complete (the provider adds its credential here, on the host)
 *   POST /v1/fetch  → the egress-guarded fetcher, declared URLs only (research candidates)
 *
 * Security decisions:
 * - The socket is 0600 and owned by the sandbox uid when one is given: only that child can talk.
 *   Its parent directory should be private too (listen() creates the socket before chmod).
 * - Every body is size-bounded and checked against a closed schema before use.
 * - The model request cap (550, docs/behaviour.md#b9) is enforced here as well as in the child; the child
 *   cannot raise it. Fetches are capped at the tool-call limit.
 * - The declared-URL check is repeated here (defence in depth): an undeclared URL is refused and
 *   recorded only as sha256Hex(raw URL), so no undeclared URL is stored anywhere.
 * - Responses and records carry no provider, model name or credential; provider error messages
 *   pass through `redactSecrets` before they reach the child.
 * - Requests are served one at a time, so record ordinals follow arrival order.
 *
 * The broker keeps its own record of every model call and fetch (docs/behaviour.md#d7), cross-checked later
 * against the child's sealed log.
 */
import { chmod, chown, lstat, unlink } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { FetchRequest, FetchResponse, ModelTurnRequest, ModelTurnResponse, StageRole } from '../contracts/broker-protocol.js';
import {
  brokerFetchRecordSchema,
  type BrokerFetchRecord,
  type BrokerModelRecord,
  type BrokerRecord,
} from '../contracts/broker-record.js';
import { CHILD_LIMITS } from '../contracts/constants.js';
import { FusionError, type ErrorCode } from '../errors.js';
import type { Logger } from '../log.js';
import type { ModelProvider } from '../models/port.js';
import {
  BodyTooLarge,
  asFusionError,
  hostOf,
  httpStatusOf,
  parseJsonBody,
  readBody,
  sendError,
  sendJson,
} from './broker-http.js';
import { MAX_FETCH_BODY_BYTES, MAX_MODEL_BODY_BYTES, describeIssues, fetchRequestSchema, modelTurnRequestSchema } from './wire-schema.js';
import { sha256Hex } from '../contracts/sha256.js';
import { webFetchResultText } from '../contracts/web-fetch-result.js';
import { redactSecrets } from '../contracts/secret-redaction.js';
import { closeServer } from '../http/http-util.js';


export type BrokerFetcher = (req: FetchRequest, signal: AbortSignal) => Promise<FetchResponse>;

export interface BrokerOptions {
  socketPath: string;
  provider: ModelProvider;
  role: StageRole;
  taskId: string;
  /** docs/behaviour.md#b9: 550. */
  maxModelRequests?: number;
  maxOutputTokens?: number;
  /** The egress guard; absent → /v1/fetch answers "fetch is not available to this child". */
  fetcher?: BrokerFetcher;
  /** Declared canonical URLs; only these are ever fetched. */
  declaredUrls: readonly string[];
  /** Called on every request (the launcher's idle timer). */
  onActivity?: () => void;
  log: Logger;
  /** Aborting closes the broker. */
  signal?: AbortSignal;
  /** chown the socket to the sandbox's unprivileged uid/gid. */
  socketOwner?: { uid: number; gid: number };
}

export interface BrokerUsage {
  inputTokens: number;
  outputTokens: number;
  /** Model requests forwarded to the provider. */
  requests: number;
}

export interface BrokerHandle {
  readonly socketPath: string;
  /** The broker's own record, in arrival order (live; copy it if you keep it). */
  readonly records: BrokerRecord[];
  /** Usage so far (a snapshot). */
  readonly usage: BrokerUsage;
  /** The last failed model call as the provider described it (redacted; host side only). */
  readonly lastModelError: { code: string; message: string } | undefined;
  /**
   * Every tool call the model asked for in answers delivered to the child, in order, with its
   * raw arguments text (host side only; the replay verification re-runs them).
   */
  readonly requestedCalls: ReadonlyArray<{ name: string; arguments: string }>;
  close(): Promise<void>;
}

/** Refusal codes in the broker's fetch records that are not egress errors. */
export const BROKER_FETCH_REFUSALS = {
  notDeclared: 'url_not_declared',
  unavailable: 'fetch_unavailable',
} as const satisfies Record<string, ErrorCode>;


/** Connections one child may hold open, and requests it may have waiting. */
export const MAX_BROKER_CONNECTIONS = 8;
export const MAX_QUEUED_REQUESTS = 4;

export const BROKER_MESSAGES = {
  fetchUnavailable: 'fetch is not available to this child',
  notDeclared: 'fusion_web_fetch URL was not declared in the research source policy',
} as const;

const SNAKE_CODE = /^[a-z][a-z0-9_]*$/;


export async function startBroker(options: BrokerOptions): Promise<BrokerHandle> {
  const log = options.log.child({ component: 'broker', taskId: options.taskId, stage: options.role });
  const maxModelRequests = options.maxModelRequests ?? CHILD_LIMITS.maxModelRequests;
  const maxFetches = CHILD_LIMITS.maxToolCalls;
  const declared = new Set(options.declaredUrls);
  const records: BrokerRecord[] = [];
  const requestedCalls: Array<{ name: string; arguments: string }> = [];
  const usage: BrokerUsage = { inputTokens: 0, outputTokens: 0, requests: 0 };
  const lifetime = new AbortController();
  let modelArrivals = 0;
  let fetchArrivals = 0;
  let queue: Promise<void> = Promise.resolve();

  const activity = (): void => {
    try {
      options.onActivity?.();
    } catch (err) {
      log.warn({ err }, 'broker activity callback failed');
    }
  };

  async function handleModel(req: IncomingMessage, res: ServerResponse, signal: AbortSignal): Promise<void> {
    const startedMs = Date.now();
    const at = new Date(startedMs).toISOString();
    modelArrivals += 1;
    const overCap = modelArrivals > maxModelRequests;
    // Only the first refusal past the cap is recorded, so a looping child cannot grow the record.
    if (overCap && modelArrivals > maxModelRequests + 1) {
      req.resume();
      sendError(res, new FusionError('child_limit_exceeded', `model request limit of ${String(maxModelRequests)} reached`), 429);
      log.debug({ kind: 'model', arrivals: modelArrivals }, 'broker model call refused');
      return;
    }
    const ordinal = records.length;
    let requestBytes = 0;
    let responseBytes = 0;
    let toolCallsRequested = 0;
    let provenance: Pick<BrokerModelRecord, 'requested_calls' | 'sent_results' | 'content_sha256'> = {};
    let rawCalls: Array<{ name: string; arguments: string }> = [];
    let ok = false;
    let code: string | undefined;
    let purpose: string | undefined;
    try {
      if (overCap) {
        req.resume();
        throw new FusionError('child_limit_exceeded', `fusion child reached model request ${String(maxModelRequests + 1)}, exceeding the ${String(maxModelRequests)}-request limit`);
      }
      const body = await readBody(req, MAX_MODEL_BODY_BYTES);
      requestBytes = body.length;
      const turn: ModelTurnRequest = parseJsonBody(body, modelTurnRequestSchema, 'model turn');
      purpose = turn.purpose ?? 'step';
      usage.requests += 1;
      // The tool results this request brings back: the tool messages after the last assistant turn.
      const lastAssistant = turn.messages.map((m) => m.role).lastIndexOf('assistant');
      const sentResults = turn.messages.slice(lastAssistant + 1).filter((m) => m.role === 'tool').map((m) => sha256Hex(m.content));
      const response = await options.provider.complete({
        role: options.role,
        taskId: options.taskId,
        messages: turn.messages,
        // The compression turn is tool-free whatever the child sent (docs/behaviour.md#b8).
        tools: turn.purpose === 'compress' ? [] : turn.tools,
        ...(options.maxOutputTokens === undefined ? {} : { maxOutputTokens: options.maxOutputTokens }),
        signal,
      });
      usage.inputTokens += response.usage.inputTokens;
      usage.outputTokens += response.usage.outputTokens;
      toolCallsRequested = response.toolCalls.length;
      provenance = {
        requested_calls: response.toolCalls.map((c) => ({ name: c.name, arguments_sha256: sha256Hex(c.arguments) })),
        sent_results: sentResults,
        content_sha256: sha256Hex(response.content),
      };
      rawCalls = response.toolCalls.map((c) => ({ name: c.name, arguments: c.arguments }));
      // No model name, provider id or credential crosses to the child.
      const out: ModelTurnResponse = {
        message: { role: 'assistant', content: response.content, tool_calls: response.toolCalls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments })) },
        stop_reason: response.stopReason,
        usage: { input_tokens: response.usage.inputTokens, output_tokens: response.usage.outputTokens },
      };
      responseBytes = sendJson(res, 200, out);
      ok = true;
    } catch (err) {
      const error = err instanceof BodyTooLarge
        ? new FusionError('payload_too_large', `model turn body exceeds ${String(MAX_MODEL_BODY_BYTES)} bytes`)
        : asFusionError(err, 'model_error');
      code = error.code;
      if (error.code === 'model_error') {
        // The provider's own text names the provider, model and host: a candidate could paste
        // it into its answer and unblind the evaluator. The host log keeps the detail.
        log.warn({ kind: 'model', ordinal, err: { code: error.code, message: redactSecrets(error.message) } }, 'model call failed');
        lastModelError = { code: error.code, message: redactSecrets(error.message) };
        responseBytes = sendError(res, new FusionError('model_error', `the model call failed${error.retryable ? ' (transient; retries exhausted)' : ''}`), error.httpStatus);
        return;
      }
      responseBytes = sendError(res, error, error.code === 'child_limit_exceeded' ? 429 : error.httpStatus);
    } finally {
      const durationMs = Math.max(0, Date.now() - startedMs);
      const record: BrokerModelRecord = { kind: 'model', ordinal, at, durationMs, requestBytes, responseBytes, toolCallsRequested, ok, ...provenance };
      records.push(record);
      // Same order as the records' requested_calls: only answers the child received count.
      if (ok) requestedCalls.push(...rawCalls);
      log.info({ kind: 'model', ordinal, purpose, ok, code, durationMs, requestBytes, responseBytes, toolCallsRequested }, 'broker model call');
    }
  }

  /** Runs the fetch; never throws. Returns the wire answer and the record fields it implies. */
  async function performFetch(fetchReq: FetchRequest, signal: AbortSignal): Promise<FetchResponse> {
    const fetcher = options.fetcher;
    if (fetcher === undefined) throw new FusionError('forbidden', BROKER_MESSAGES.fetchUnavailable);
    try {
      return await fetcher(fetchReq, signal);
    } catch (err) {
      const error = asFusionError(err, 'network_error');
      const httpStatus = httpStatusOf(error.details.status) ?? httpStatusOf(error.details.httpStatus) ?? httpStatusOf(error.details.http_status);
      return { ok: false, error: { code: error.code, message: redactSecrets(error.message), ...(httpStatus === undefined ? {} : { http_status: httpStatus }) } };
    }
  }

  async function handleFetch(req: IncomingMessage, res: ServerResponse, signal: AbortSignal): Promise<void> {
    const at = new Date().toISOString();
    fetchArrivals += 1;
    if (fetchArrivals > maxFetches) {
      req.resume();
      sendError(res, new FusionError('child_limit_exceeded', `fetch limit of ${String(maxFetches)} reached`), 429);
      log.info({ kind: 'fetch', arrivals: fetchArrivals }, 'broker fetch refused');
      return;
    }
    let fetchReq: FetchRequest;
    try {
      fetchReq = parseJsonBody(await readBody(req, MAX_FETCH_BODY_BYTES), fetchRequestSchema, 'fetch');
    } catch (err) {
      // Not a fetch attempt the child could log as one: nothing recorded.
      const error = err instanceof BodyTooLarge ? new FusionError('payload_too_large', `fetch body exceeds ${String(MAX_FETCH_BODY_BYTES)} bytes`) : asFusionError(err, 'invalid_input');
      sendError(res, error);
      log.info({ kind: 'fetch', ok: false, code: error.code }, 'broker fetch refused');
      return;
    }
    const ordinal = records.length;
    const url = fetchReq.url;

    if (options.fetcher === undefined || !declared.has(url)) {
      const refusal = options.fetcher === undefined ? BROKER_FETCH_REFUSALS.unavailable : BROKER_FETCH_REFUSALS.notDeclared;
      const rejectedUrlSha256 = sha256Hex(url);
      records.push({ kind: 'fetch', ordinal, at, ok: false, error_code: refusal, rejected_url_sha256: rejectedUrlSha256 });
      // Only the hash: an undeclared URL is never logged or stored.
      log.info({ kind: 'fetch', ordinal, ok: false, allow: false, reason: refusal, rejectedUrlSha256 }, 'broker fetch refused');
      if (options.fetcher === undefined) sendError(res, new FusionError('forbidden', BROKER_MESSAGES.fetchUnavailable));
      else sendJson(res, 200, { ok: false, error: { code: refusal, message: BROKER_MESSAGES.notDeclared } } satisfies FetchResponse);
      return;
    }

    let response = await performFetch(fetchReq, signal);
    let record: BrokerFetchRecord;
    if (response.ok) {
      const result = response.result;
      const candidate = {
        kind: 'fetch' as const,
        ordinal,
        at,
        url,
        ok: true,
        final_url: result.final_url,
        http_status: result.status,
        content_sha256: result.content_sha256,
        // What the child must hand its model: the audit compares the logged tool result with it.
        result_sha256: sha256Hex(webFetchResultText(result)),
        response_bytes: result.response_bytes,
      };
      const checked = brokerFetchRecordSchema.safeParse(candidate);
      if (checked.success) {
        record = checked.data;
      } else {
        // A fetcher bug must not produce a record the cross-check cannot trust: refuse instead.
        log.error({ issues: describeIssues(checked.error) }, 'broker fetcher returned invalid provenance');
        response = { ok: false, error: { code: 'internal_error', message: 'fetch result provenance is invalid' } };
        record = { kind: 'fetch', ordinal, at, url, ok: false, error_code: 'internal_error' };
      }
    } else {
      const errorCode = SNAKE_CODE.test(response.error.code) ? response.error.code : 'network_error';
      const httpStatus = httpStatusOf(response.error.http_status);
      record = { kind: 'fetch', ordinal, at, url, ok: false, error_code: errorCode, ...(httpStatus === undefined ? {} : { http_status: httpStatus }) };
    }
    records.push(record);
    log.info(
      {
        kind: 'fetch',
        ordinal,
        ok: record.ok,
        allow: true,
        host: hostOf(url),
        httpStatus: record.http_status,
        responseBytes: record.response_bytes,
        code: record.error_code,
      },
      'broker fetch',
    );
    sendJson(res, 200, response);
  }

  async function route(req: IncomingMessage, res: ServerResponse, requestSignal: AbortSignal): Promise<void> {
    if (requestSignal.aborted) return; // the child hung up while queued
    const signal = AbortSignal.any([lifetime.signal, requestSignal]);
    const path = (req.url ?? '').split('?')[0];
    try {
      if (path !== '/v1/model' && path !== '/v1/fetch') {
        req.resume();
        sendError(res, new FusionError('not_found', 'no such broker route'));
        return;
      }
      if (req.method !== 'POST') {
        req.resume();
        sendError(res, new FusionError('method_not_allowed', `${path} accepts POST only`));
        return;
      }
      if (path === '/v1/model') await handleModel(req, res, signal);
      else await handleFetch(req, res, signal);
    } catch (err) {
      log.error({ err }, 'broker request failed');
      if (!res.writableEnded) sendError(res, new FusionError('internal_error', 'broker request failed'));
    } finally {
      activity();
    }
  }

  let queued = 0;
  /** The provider's own (redacted) text of the last failed model call: for the task error, never the child. */
  let lastModelError: { code: string; message: string } | undefined;
  const server: Server = createServer((req, res) => {
    activity();
    const requestAbort = new AbortController();
    // A child that hangs up no longer needs the answer: stop the provider call.
    res.on('close', () => {
      if (!res.writableFinished) requestAbort.abort();
    });
    // A child needs one request at a time; a flood of parked requests would only hold daemon
    // file descriptors and memory, so the queue is bounded.
    if (queued >= MAX_QUEUED_REQUESTS) {
      sendError(res, new FusionError('child_limit_exceeded', `more than ${String(MAX_QUEUED_REQUESTS)} broker requests are waiting`), 429);
      return;
    }
    queued += 1;
    // One request at a time: ordinals follow arrival, the cap check cannot race.
    queue = queue.then(() => route(req, res, requestAbort.signal)).finally(() => {
      queued -= 1;
    });
  });
  // Bounded connections: each one is a daemon file descriptor.
  server.maxConnections = MAX_BROKER_CONNECTIONS;
  server.on('clientError', (_err, socket) => {
    socket.destroy();
  });

  await removeStaleSocket(options.socketPath);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  try {
    await chmod(options.socketPath, 0o600);
    if (options.socketOwner !== undefined) await chown(options.socketPath, options.socketOwner.uid, options.socketOwner.gid);
  } catch (err) {
    await closeServer(server, options.socketPath);
    throw new FusionError('launch_failed', `broker socket permissions could not be set: ${err instanceof Error ? err.message : String(err)}`, { cause: err, retryable: false });
  }
  log.info({ role: options.role, fetch: options.fetcher !== undefined, declaredUrls: declared.size }, 'broker listening');

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      lifetime.abort();
      await closeServer(server, options.socketPath);
      log.info({ modelRequests: usage.requests, records: records.length }, 'broker closed');
    })();
    return closing;
  };
  if (options.signal !== undefined) {
    if (options.signal.aborted) await close();
    else options.signal.addEventListener('abort', () => void close(), { once: true });
  }

  return {
    socketPath: options.socketPath,
    get records() {
      return records;
    },
    get usage() {
      return { ...usage };
    },
    get lastModelError() {
      return lastModelError;
    },
    get requestedCalls() {
      return requestedCalls;
    },
    close,
  };
}

/** A leftover socket from a crashed run is removed; any other file at the path is an error. */
async function removeStaleSocket(path: string): Promise<void> {
  let isSocket: boolean;
  try {
    isSocket = (await lstat(path)).isSocket();
  } catch {
    return;
  }
  if (!isSocket) throw new FusionError('launch_failed', 'broker socket path exists and is not a socket', { retryable: false, details: { path } });
  await unlink(path);
}
