/**
 * The shared HTTP loop of the remote providers: one POST of a JSON body, retried with
 * exponential backoff and jitter on 408/429/5xx and network failures, honouring `retry-after`.
 *
 * Deadline: `timeoutMs` is ONE deadline over every attempt and every wait of the call
 * (`AbortSignal.timeout` combined with the caller's signal), so a hung or slow-dripping provider
 * cannot hold a model turn past it, and a retry wait that would end after it is not started.
 * `retry-after` (seconds or an HTTP date; `retry-after-ms` too) is capped at `maxRetryAfterMs`.
 *
 * Secrets: headers are never logged or put into errors. Upstream error text is passed through
 * the caller's `redact` (the credential's redactor) before it reaches a message, details or a
 * log line. Library errors are wrapped: nothing above this file sees an undici error type, and
 * no `cause` is attached (an error object graph is one more place a header could hide).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { inspect } from 'node:util';
import { request } from 'undici';
import type { ModelPrices } from '../contracts/model-config.js';
import { FusionError } from '../errors.js';
import { untrusted, type Logger } from '../log.js';
import type { ModelProvider, ModelRequest, ModelResponse } from './port.js';
import type { Credential } from './credentials.js';
import { redactSecrets } from '../contracts/secret-redaction.js';

export interface RetryPolicy {
  maxAttempts: number;
  /** First backoff step; doubles each retry (before jitter). */
  baseDelayMs: number;
  maxDelayMs: number;
  /** Upper bound for a server-requested `retry-after` wait. */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
  maxAttempts: 4,
  baseDelayMs: 500,
  maxDelayMs: 8_000,
  maxRetryAfterMs: 60_000,
});

/** A response larger than this is refused (a chat completion is kilobytes). */
export const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

export interface PostJsonOptions {
  /** Provider id for messages and logs (`openai:gpt-4.1`). */
  providerId: string;
  url: string;
  headers: Record<string, string>;
  body: unknown;
  timeoutMs: number;
  signal?: AbortSignal;
  policy?: Partial<RetryPolicy>;
  redact: (text: string) => string;
  log: Logger;
  /** Test seam for the jitter. */
  random?: () => number;
}

export interface PostJsonResult {
  status: number;
  /** The parsed body. */
  json: unknown;
  attempts: number;
  latencyMs: number;
}

type Outcome =
  | { kind: 'status'; status: number; text: string; retryAfterMs: number | undefined }
  | { kind: 'network'; reason: string };

export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || (status >= 500 && status <= 599);
}

/** `retry-after-ms` (OpenAI) or `retry-after` as delta-seconds or an HTTP date; ms from `now`. */
export function parseRetryAfter(headers: Record<string, string | string[] | undefined>, now = Date.now()): number | undefined {
  const first = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v)?.trim();
  const ms = first(headers['retry-after-ms']);
  if (ms !== undefined && /^\d+(\.\d+)?$/.test(ms)) return Math.ceil(Number(ms));
  const value = first(headers['retry-after']);
  if (value === undefined || value === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Number(value) * 1000);
  // Only an HTTP date (it names a weekday and month); Date.parse would also accept "-3".
  if (!/[A-Za-z]{3}/.test(value)) return undefined;
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

/** Exponential backoff with "equal jitter": half fixed, half random, so waits never collapse to 0. */
export function backoffMs(retry: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const step = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, retry - 1));
  return Math.round(step / 2 + (step / 2) * random());
}

/** The upstream's own error message when the body is a JSON error envelope, else a snippet. */
export function upstreamMessage(text: string): string {
  try {
    const body = JSON.parse(text) as { error?: unknown; message?: unknown };
    const err = body.error;
    if (typeof err === 'string') return err;
    if (err !== null && typeof err === 'object') {
      const m = (err as { message?: unknown }).message;
      if (typeof m === 'string') return m;
    }
    if (typeof body.message === 'string') return body.message;
  } catch {
    // not JSON: fall through to the raw snippet
  }
  return text.trim() === '' ? '(empty body)' : text;
}

function networkReason(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return typeof code === 'string' ? `${code}: ${err.message}` : err.message;
  }
  return String(err);
}

/** The body as text, or `null` when it is over MAX_RESPONSE_BYTES (the stream is destroyed). */
async function readCapped(body: AsyncIterable<Buffer> & { destroy(err?: Error): unknown }): Promise<string | null> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of body) {
    bytes += chunk.length;
    if (bytes > MAX_RESPONSE_BYTES) {
      body.destroy();
      return null;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export async function postJson(opts: PostJsonOptions): Promise<PostJsonResult> {
  const policy: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...opts.policy };
  const started = Date.now();
  const deadline = started + opts.timeoutMs;
  const timeout = AbortSignal.timeout(opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
  const payload = JSON.stringify(opts.body);
  const host = new URL(opts.url).host;
  const fail = (message: string, details: Record<string, unknown>, retryable?: boolean): FusionError =>
    new FusionError('model_error', opts.redact(`${opts.providerId}: ${message}`), {
      details: { provider: opts.providerId, ...details },
      ...(retryable === undefined ? {} : { retryable }),
    });
  const aborted = (attempts: number): FusionError => {
    if (opts.signal?.aborted) {
      // The caller's own deadline (AbortSignal.timeout) is a timeout; anything else a cancel.
      const reason: unknown = opts.signal.reason;
      if (reason instanceof Error && reason.name === 'TimeoutError') return fail("no complete response before the caller's deadline", { attempts, callerTimeout: true });
      return fail('model request was cancelled', { attempts, cancelled: true }, false);
    }
    return fail(`no complete response within the ${opts.timeoutMs} ms timeout`, { attempts, timeoutMs: opts.timeoutMs });
  };

  for (let attempt = 1; ; attempt++) {
    let outcome: Outcome;
    try {
      const res = await request(opts.url, {
        method: 'POST',
        headers: { ...opts.headers, 'content-type': 'application/json', accept: 'application/json' },
        body: payload,
        signal,
        // The deadline above governs; undici's own (300 s) timers must not cut in first.
        headersTimeout: opts.timeoutMs,
        bodyTimeout: opts.timeoutMs,
      });
      const text = await readCapped(res.body);
      if (text === null) throw fail(`HTTP ${res.statusCode} from ${host} with a body over ${MAX_RESPONSE_BYTES} bytes`, { status: res.statusCode, attempts: attempt }, false);
      if (res.statusCode >= 200 && res.statusCode < 300) {
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          throw fail(`HTTP ${res.statusCode} from ${host} with a malformed JSON body: ${untrusted(text, 200)}`, { status: res.statusCode, attempts: attempt }, false);
        }
        const latencyMs = Date.now() - started;
        opts.log.debug({ provider: opts.providerId, status: res.statusCode, attempts: attempt, latencyMs }, 'model request completed');
        return { status: res.statusCode, json, attempts: attempt, latencyMs };
      }
      outcome = { kind: 'status', status: res.statusCode, text, retryAfterMs: parseRetryAfter(res.headers) };
    } catch (err) {
      if (err instanceof FusionError) throw err;
      if (signal.aborted) throw aborted(attempt);
      outcome = { kind: 'network', reason: networkReason(err) };
    }

    const describe = (): string =>
      outcome.kind === 'status'
        ? `HTTP ${outcome.status} from ${host}: ${untrusted(upstreamMessage(outcome.text), 500)}`
        : `network error reaching ${host}: ${untrusted(outcome.reason, 300)}`;
    const details = (): Record<string, unknown> => ({
      attempts: attempt,
      ...(outcome.kind === 'status' ? { status: outcome.status } : { network: true }),
    });
    const retryable = outcome.kind === 'network' || isRetryableStatus(outcome.status);
    if (!retryable) throw fail(describe(), details(), false);
    if (attempt >= policy.maxAttempts) throw fail(`${describe()} (gave up after ${attempt} attempt${attempt === 1 ? '' : 's'})`, details());

    const requested = outcome.kind === 'status' ? outcome.retryAfterMs : undefined;
    const waitMs = Math.min(requested ?? backoffMs(attempt, policy, opts.random), policy.maxRetryAfterMs);
    const remainingMs = deadline - Date.now();
    if (waitMs >= remainingMs) {
      throw fail(`${describe()} (a retry after ${waitMs} ms would pass the ${opts.timeoutMs} ms deadline)`, { ...details(), retryAfterMs: waitMs });
    }
    opts.log.warn(
      { provider: opts.providerId, attempt, ...(outcome.kind === 'status' ? { status: outcome.status } : { reason: opts.redact(untrusted(outcome.reason, 200)) }), waitMs, serverRequested: requested !== undefined },
      'model request failed; retrying',
    );
    try {
      await sleep(waitMs, undefined, { signal });
    } catch {
      throw aborted(attempt);
    }
  }
}

/** What a remote provider adapter needs besides its credential (resolved, defaults applied). */
export interface RemoteModelSettings {
  model: string;
  /** Normalised, no trailing slash. */
  baseUrl: string;
  timeoutMs: number;
  maxAttempts: number;
  maxOutputTokens?: number;
  prices: ModelPrices;
  /** Backoff tuning (tests shorten it); `maxAttempts` above wins over `retry.maxAttempts`. */
  retry?: Partial<RetryPolicy>;
}

/** Safe to log, serialise and show: no key, only where the key comes from. */
export interface ProviderDescription {
  id: string;
  engine: string;
  model: string;
  baseUrl?: string;
  /** Where the key comes from (`env NAME`, `file PATH`), null without one; never the key. */
  keySource?: string | null;
  timeoutMs?: number;
  maxAttempts?: number;
  maxOutputTokens?: number;
  prices: ModelPrices;
}

/** A configured provider: the port plus what accounting and `models check` need. */
export interface ConfiguredProvider extends ModelProvider {
  readonly model: string;
  readonly prices: ModelPrices;
  describe(): ProviderDescription;
  toJSON(): ProviderDescription;
}

/** ≈ 4 bytes per token: used only when a server reports no usage. */
export function estimateTokens(text: string): number {
  return Math.ceil(Buffer.byteLength(text) / 4);
}

export function describeRemote(engine: string, settings: RemoteModelSettings, keySource: string | null): ProviderDescription {
  return {
    id: `${engine}:${settings.model}`,
    engine,
    model: settings.model,
    baseUrl: settings.baseUrl,
    keySource,
    timeoutMs: settings.timeoutMs,
    maxAttempts: settings.maxAttempts,
    ...(settings.maxOutputTokens === undefined ? {} : { maxOutputTokens: settings.maxOutputTokens }),
    prices: { ...settings.prices },
  };
}

/**
 * Builds the provider object. `complete` is a closure over the credential; the object itself
 * holds only public fields, and `toJSON`/`inspect` show the description.
 */
export function makeConfiguredProvider(description: ProviderDescription, complete: (req: ModelRequest) => Promise<ModelResponse>): ConfiguredProvider {
  const frozen = Object.freeze({ ...description, prices: Object.freeze({ ...description.prices }) });
  const provider: ConfiguredProvider = {
    id: description.id,
    engine: description.engine,
    model: description.model,
    prices: frozen.prices,
    complete,
    describe: () => ({ ...frozen, prices: { ...frozen.prices } }),
    toJSON: () => ({ ...frozen, prices: { ...frozen.prices } }),
  };
  Object.defineProperty(provider, inspect.custom, { value: () => `[ModelProvider ${description.id}${description.baseUrl ? ` @ ${description.baseUrl}` : ''}]`, enumerable: false });
  return Object.freeze(provider);
}

/**
 * Last line of defence before an error leaves a provider: the message and string details pass
 * through the credential's redactor, and anything that is not a FusionError becomes a
 * `model_error` without its original object (which could carry request options).
 */
export function sanitizeProviderError(err: unknown, providerId: string, redact: (text: string) => string): FusionError {
  if (err instanceof FusionError) {
    let details: Record<string, unknown>;
    try {
      details = JSON.parse(redact(JSON.stringify(err.details))) as Record<string, unknown>;
    } catch {
      details = { provider: providerId };
    }
    return new FusionError(err.code, redact(err.message), { details, retryable: err.retryable, ...(err.stage === undefined ? {} : { stage: err.stage }) });
  }
  const message = err instanceof Error ? err.message : String(err);
  return new FusionError('model_error', redact(`${providerId}: ${message}`), { details: { provider: providerId }, retryable: false });
}

/** The output cap of one request: the stage's cap, never above the model's configured one. */
export function effectiveMaxTokens(requested: number | undefined, configured: number | undefined): number | undefined {
  if (requested === undefined) return configured;
  return configured === undefined ? requested : Math.min(requested, configured);
}

export interface RemoteProviderSpec {
  engine: 'openai' | 'anthropic';
  settings: RemoteModelSettings;
  credential: Credential | undefined;
  log: Logger;
  /** Appended to the base URL, e.g. `/chat/completions`. */
  path: string;
  /** Request headers; `key` is absent for an endpoint configured without one. */
  headers(key: string | undefined): Record<string, string>;
  toBody(req: ModelRequest): unknown;
  fromBody(json: unknown, req: ModelRequest, providerId: string, configuredModel: string): ModelResponse;
}

/**
 * One remote provider over the shared transport: body mapping and headers differ per wire
 * format; retries, the deadline, redaction and error sanitising are the same for every one.
 */
export function createRemoteProvider(spec: RemoteProviderSpec): ConfiguredProvider {
  const { settings, credential } = spec;
  const description = describeRemote(spec.engine, settings, credential?.source ?? null);
  const url = `${settings.baseUrl}${spec.path}`;
  const redact = credential ? credential.redact : redactSecrets;
  const plog = spec.log.child({ component: 'model', provider: description.id });
  return makeConfiguredProvider(description, async (req) => {
    try {
      const res = await postJson({
        providerId: description.id,
        url,
        headers: credential ? credential.use((key) => spec.headers(key)) : spec.headers(undefined),
        body: spec.toBody(req),
        timeoutMs: settings.timeoutMs,
        ...(req.signal ? { signal: req.signal } : {}),
        policy: { ...settings.retry, maxAttempts: settings.maxAttempts },
        redact,
        log: plog,
      });
      return spec.fromBody(res.json, req, description.id, settings.model);
    } catch (err) {
      throw sanitizeProviderError(err, description.id, redact);
    }
  });
}
