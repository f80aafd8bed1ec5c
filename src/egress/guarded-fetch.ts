/**
 * The guarded fetch (docs/behaviour.md#e3): the only way the daemon reads a web page on a child's behalf.
 *
 * One call = one deadline (default 90 s) over DNS, connect, up to 5 redirects, the transfer and
 * the extraction. Per hop: shape the URL (fetch-url.ts) → vet the host and pin one address
 * (host-vetting.ts; the resolver is consulted at most once per hop) → connect to exactly that
 * address and check the peer (pinned-connector.ts) → GET with fixed headers → redirects are
 * followed without reading their body; a 2xx answer is checked (response-checks.ts), read up to
 * the byte cap and hashed, then extracted off the event loop (extract-pool.ts).
 *
 * Every failure is a FusionError with one of the twelve egress codes; `http_status` is in its
 * details whenever a response status was seen. Every allow/deny decision is one log line.
 *
 * Admin seams (`resolveOverrides`, `allowCidrs`) widen what is reachable, so a warning is logged
 * when the fetcher is created with either.
 *
 * A call may carry a profile (fetch-profile.ts: User-Agent, media types, caps, extraction mode,
 * links, whether a redirect is followed or returned); the address rules above are the same for
 * every profile. Without one, a call is the
 * broker's fetch exactly as described here.
 */
import { Client } from 'undici';
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from '../log.js';
import type { FetchResponse, FetchResult } from '../contracts/broker-protocol.js';
import { parseCidrList } from '../contracts/address-class.js';
import { FusionError, isFusionError, toFusionError } from '../errors.js';
import {
  ACCEPT_ENCODING_HEADER,
  ACCEPT_HEADER,
  ALLOWED_MEDIA_TYPES,
  DEFAULT_DEADLINE_MS,
  DEFAULT_MAX_OUTPUT_BYTES,
  DEFAULT_MAX_REDIRECTS,
  DEFAULT_MAX_RESPONSE_BYTES,
  DEFAULT_USER_AGENT,
  REDIRECT_STATUSES,
  blockCode,
  type ExtractMode,
} from './constants.js';
import { ExtractPool } from './extract-pool.js';
import { checkUserAgent, type FetchProfile } from './fetch-profile.js';
import { parseFetchUrl, type FetchTarget } from './fetch-url.js';
import { defaultResolver, vetHost, vetHostStatically, type Resolver } from './host-vetting.js';
import { createPinnedConnector } from './pinned-connector.js';
import { normalizeOverrides } from './resolve-list.js';
import { checkContentEncoding, checkContentLength, checkMediaType, parseContentType, readCappedBody, type CappedBody, type ContentType } from './response-checks.js';

export interface GuardedFetchOptions {
  log: Logger;
  /** DNS resolver, consulted at most once per hop; default `dns.promises.lookup(host, {all:true})`. */
  resolve?: Resolver;
  /** Admin seam: host → address, replacing DNS for that host (the address is still classified). */
  resolveOverrides?: ReadonlyMap<string, string>;
  /** Admin seam: CIDRs treated as public. */
  allowCidrs?: readonly string[];
  deadlineMs?: number;
  maxResponseBytes?: number;
  maxOutputBytes?: number;
  maxRedirects?: number;
  userAgent?: string;
  /** Extraction workers kept warm (default 2). */
  extractWorkers?: number;
  /** Heap bound per extraction worker in MiB (default 512). */
  extractMemoryMb?: number;
}

export interface GuardedFetchRequest {
  url: string;
  extract?: ExtractMode;
  /** Per-call settings (research runs); absent for the broker's fetch. */
  profile?: FetchProfile;
}

/** A fetch result; the extra fields appear only when the call's profile asked for them. */
export interface GuardedFetchResult extends FetchResult {
  /** Profile `links`: absolute http(s) links of an HTML page, in document order, deduplicated. */
  links?: string[];
  /** Profile overflow `cut-at-line`: the body went past the cap and only a prefix was read. */
  cut?: boolean;
  /** Profile redirects `return`: the Location (absolute, fragment dropped) of a redirect answer; no body was read. */
  redirect?: string;
}

/** sha256 of zero bytes (the body of a returned redirect, never read). */
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

export interface GuardedFetch {
  (request: GuardedFetchRequest, signal?: AbortSignal): Promise<GuardedFetchResult>;
  /** Terminates the extraction workers; later calls fail. */
  close(): Promise<void>;
  /**
   * The refusal a first hop to `url` would meet without any DNS lookup or connection (its shape,
   * a blocked name, a non-public IP literal or override; the admin seams apply), or undefined
   * when nothing static refuses it. Lets a caller refuse before it records or starts anything.
   */
  staticRefusal?(url: string): FusionError | undefined;
}

/** Error codes that mean "refused by policy" (a deny decision rather than a failed fetch). */
export const POLICY_CODES: ReadonlySet<string> = new Set(['invalid_url', 'unsupported_scheme', 'blocked_address', 'redirect_blocked']);

/** The twelve egress codes: the ways a fetch can fail. Anything else thrown by a fetch is a bug or a bad configuration. */
export const EGRESS_CODES: ReadonlySet<string> = new Set([
  ...POLICY_CODES,
  'dns_failure',
  'redirect_limit',
  'response_too_large',
  'unsupported_content_type',
  'request_timeout',
  'network_error',
  'extraction_failed',
  'http_error',
]);

interface HopState {
  hop: number;
  host: string | undefined;
  address: string | undefined;
  status: number | undefined;
}

type HopOutcome = { kind: 'redirect'; next: FetchTarget; status: number } | { kind: 'body'; status: number; contentType: ContentType; body: CappedBody; bytes: number };

/** What one call sends and accepts: the guard's defaults, or its profile's. */
interface CallSettings {
  headers: Record<string, string>;
  mediaTypes: ReadonlySet<string> | 'any-as-text';
  maxResponseBytes: number;
  overflow: 'fail' | 'cut-at-line';
  maxOutputBytes: number;
  deadlineMs: number;
}

function positiveInt(value: number | undefined, fallback: number, name: string, min = 1): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < min) {
    throw new FusionError('invalid_config', `${name} must be an integer ≥ ${String(min)}, got ${String(value)}`, { details: { path: name } });
  }
  return value;
}

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Drops an unread body without surfacing its teardown as an error. */
function discard(body: { on(event: 'error', listener: () => void): unknown; destroy(): unknown }): void {
  body.on('error', () => undefined);
  body.destroy();
}

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/**
 * Removes a call's extra header values (a search provider's key) from what the guard reports:
 * an origin that reflects the key into a Content-Type, a Content-Encoding or a Location must not
 * get it into an error message, its details or a log line. The pattern redactor cannot know a
 * key of no recognisable shape, so the values themselves are matched, in any case (a header
 * value may be lowercased on its way into a message).
 */
function headerScrubber(extra: Readonly<Record<string, string>> | undefined): ((text: string) => string) | undefined {
  const values = Object.values(extra ?? {}).filter((v) => v !== '');
  if (values.length === 0) return undefined;
  const pattern = new RegExp(values.map((v) => v.replace(/[.*+?^${}()|[\]\\]/gu, '\\$&')).join('|'), 'giu');
  return (text) => text.replace(pattern, '[redacted]');
}

function scrubError(error: FusionError, scrub: (text: string) => string): void {
  error.message = scrub(error.message);
  for (const [name, value] of Object.entries(error.details)) {
    if (typeof value === 'string') error.details[name] = scrub(value);
  }
}

export function createGuardedFetch(options: GuardedFetchOptions): GuardedFetch {
  const log = options.log.child({ component: 'egress' });
  const allowCidrs = [...(options.allowCidrs ?? [])];
  parseCidrList(allowCidrs, 'allowCidrs'); // fail at creation, not on the first fetch
  const overrides = normalizeOverrides(options.resolveOverrides ?? new Map<string, string>());
  const resolve = options.resolve ?? defaultResolver;
  const deadlineMs = positiveInt(options.deadlineMs, DEFAULT_DEADLINE_MS, 'deadlineMs');
  const maxResponseBytes = positiveInt(options.maxResponseBytes, DEFAULT_MAX_RESPONSE_BYTES, 'maxResponseBytes');
  const maxOutputBytes = positiveInt(options.maxOutputBytes, DEFAULT_MAX_OUTPUT_BYTES, 'maxOutputBytes');
  const maxRedirects = positiveInt(options.maxRedirects, DEFAULT_MAX_REDIRECTS, 'maxRedirects', 0);
  const userAgent = checkUserAgent(options.userAgent ?? DEFAULT_USER_AGENT, 'userAgent');
  const headers = { accept: ACCEPT_HEADER, 'accept-encoding': ACCEPT_ENCODING_HEADER, 'user-agent': userAgent };
  const defaults: CallSettings = { headers, mediaTypes: ALLOWED_MEDIA_TYPES, maxResponseBytes, overflow: 'fail', maxOutputBytes, deadlineMs };

  /** A profile's settings, checked like the guard's own options (a bad profile is a bug: invalid_config). */
  function settingsFor(profile: FetchProfile | undefined): CallSettings {
    if (profile === undefined) return defaults;
    const path = `profile(${profile.name})`;
    if (profile.headers !== undefined && (profile.redirects !== 'return' || profile.allowHosts === undefined)) {
      // Extra headers may carry a credential: it must never reach a host the caller did not allow.
      throw new FusionError('invalid_config', `${path}: extra headers need redirects "return" and an allowHosts list`, { details: { path: `${path}.headers` } });
    }
    return {
      headers: {
        ...profile.headers,
        accept: profile.accept ?? ACCEPT_HEADER,
        'accept-encoding': ACCEPT_ENCODING_HEADER,
        'user-agent': profile.userAgent === undefined ? userAgent : checkUserAgent(profile.userAgent, `${path}.userAgent`),
      },
      mediaTypes: profile.mediaTypes ?? ALLOWED_MEDIA_TYPES,
      maxResponseBytes: positiveInt(profile.maxResponseBytes, maxResponseBytes, `${path}.maxResponseBytes`),
      overflow: profile.overflow ?? 'fail',
      maxOutputBytes: positiveInt(profile.maxOutputBytes, maxOutputBytes, `${path}.maxOutputBytes`),
      deadlineMs: Math.min(deadlineMs, positiveInt(profile.deadlineMs, deadlineMs, `${path}.deadlineMs`)),
    };
  }
  const pool = new ExtractPool({
    ...(options.extractWorkers === undefined ? {} : { size: options.extractWorkers }),
    ...(options.extractMemoryMb === undefined ? {} : { memoryMb: options.extractMemoryMb }),
  });

  if (overrides.size > 0 || allowCidrs.length > 0) {
    log.warn(
      { resolveOverrides: Object.fromEntries(overrides), allowCidrs },
      'EGRESS GUARD WIDENED BY ADMIN SEAMS: host overrides and/or allowed CIDRs are active; addresses in allowCidrs are treated as public',
    );
  }

  async function requestHop(target: FetchTarget, hop: number, redirects: number, signal: AbortSignal, state: HopState, call: CallSettings): Promise<HopOutcome> {
    const pinned = await vetHost(target, hop, { resolve, overrides, allowCidrs, signal });
    state.address = pinned.address;
    log.info(
      { allow: true, hop, host: target.host, address: pinned.address, via: pinned.via, answers: pinned.answers, ...(pinned.allowedBy === undefined ? {} : { allowedBy: pinned.allowedBy }) },
      'egress decision',
    );
    const client = new Client(target.url.origin, {
      connect: createPinnedConnector({ pinned, servername: target.ipFamily === 0 ? target.host : undefined, signal }),
      // The one fetch deadline governs; undici's own timers would only add a second clock.
      headersTimeout: 0,
      bodyTimeout: 0,
      pipelining: 1,
    });
    try {
      const response = await client.request({ path: `${target.url.pathname}${target.url.search}`, method: 'GET', headers: call.headers, signal });
      const status = response.statusCode;
      state.status = status;
      let consumed = false;
      try {
        if (REDIRECT_STATUSES.has(status)) {
          if (redirects >= maxRedirects) {
            throw new FusionError('redirect_limit', `more than ${String(maxRedirects)} redirects`, { details: { http_status: status, max_redirects: maxRedirects } });
          }
          const location = headerValue(response.headers, 'location');
          if (location === undefined || location.trim() === '') {
            throw new FusionError('http_error', `HTTP ${String(status)} redirect without a Location header`, { details: { http_status: status } });
          }
          try {
            return { kind: 'redirect', next: parseFetchUrl(location, hop + 1, target.url), status };
          } catch (err) {
            if (isFusionError(err)) err.details.http_status = status;
            throw err;
          }
        }
        if (status < 200 || status > 299) {
          throw new FusionError('http_error', `origin answered HTTP ${String(status)}`, { details: { http_status: status } });
        }
        const contentType = call.mediaTypes === 'any-as-text' ? anyAsText(response.headers) : checkMediaType(response.headers, status, call.mediaTypes);
        checkContentEncoding(response.headers, status);
        // A body that may be cut is never refused on its declared length (only malformed is).
        checkContentLength(response.headers, call.overflow === 'cut-at-line' ? Number.MAX_SAFE_INTEGER : call.maxResponseBytes, status);
        consumed = true;
        const body = await readCappedBody(response.body, call.maxResponseBytes, status, call.overflow);
        return { kind: 'body', status, contentType, body, bytes: body.bytes.byteLength };
      } finally {
        if (!consumed) discard(response.body);
      }
    } finally {
      client.destroy().catch(() => undefined);
    }
  }

  async function run(request: GuardedFetchRequest, signal: AbortSignal, state: HopState, call: CallSettings): Promise<GuardedFetchResult> {
    const extract = request.profile?.extract ?? request.extract;
    if (extract !== undefined && extract !== 'text' && extract !== 'markdown') {
      throw new FusionError('invalid_input', 'extract must be "text" or "markdown"', { details: { path: 'extract' } });
    }
    const first = parseFetchUrl(request.url, 0);
    let target = first;
    let redirectStatus: number | undefined;
    for (let hop = 0, redirects = 0; ; hop++) {
      Object.assign(state, { hop, host: target.host, address: undefined, status: undefined });
      const allowHosts = request.profile?.allowHosts;
      if (allowHosts !== undefined && !allowHosts.has(target.host)) {
        // Checked before DNS: a host outside the call's list is never resolved nor contacted.
        throw new FusionError(blockCode(hop), `host ${target.host} is not in the allowed hosts of this ${request.profile?.name ?? ''} call`, {
          details: { reason: 'host not in the allow list', host: target.host, ...(hop > 0 && redirectStatus !== undefined ? { http_status: redirectStatus } : {}) },
        });
      }
      let outcome: HopOutcome;
      try {
        outcome = await requestHop(target, hop, redirects, signal, state, call);
      } catch (err) {
        // A hop refused by policy keeps the status of the redirect that pointed there.
        if (isFusionError(err) && err.code === 'redirect_blocked' && err.details.http_status === undefined && redirectStatus !== undefined) {
          err.details.http_status = redirectStatus;
        }
        throw err;
      }
      if (outcome.kind === 'redirect') {
        if (request.profile?.redirects === 'return') {
          // The caller follows it itself (a crawler applies robots.txt and its limits to the
          // target first). Its Location was shaped like any hop's; the target is not vetted yet.
          return {
            url: first.canonical,
            final_url: target.canonical,
            status: outcome.status,
            content_type: '',
            format: 'text',
            truncated: false,
            content: '',
            response_bytes: 0,
            content_sha256: EMPTY_SHA256,
            redirect: outcome.next.canonical,
          };
        }
        target = outcome.next;
        redirectStatus = outcome.status;
        redirects += 1;
        continue;
      }
      const { status, contentType, body, bytes } = outcome;
      const links = request.profile?.links === true;
      const extracted = await pool.run(
        {
          body: body.bytes,
          mediaType: call.mediaTypes === 'any-as-text' ? 'text/plain' : contentType.mediaType,
          charset: contentType.charset,
          extract,
          baseUrl: target.canonical,
          maxOutputBytes: call.maxOutputBytes,
          ...(links ? { links: true } : {}),
        },
        signal,
      );
      return {
        url: first.canonical,
        final_url: target.canonical,
        status,
        content_type: contentType.mediaType,
        format: extracted.format,
        truncated: extracted.truncated,
        content: extracted.content,
        response_bytes: bytes,
        content_sha256: body.sha256,
        ...(links ? { links: extracted.links ?? [] } : {}),
        ...(body.cut === undefined ? {} : { cut: body.cut }),
      };
    }
  }

  /** Maps whatever was thrown to one typed egress error. */
  function typed(err: unknown, deadline: AbortSignal, caller: AbortSignal | undefined, state: HopState, callDeadlineMs: number): FusionError {
    const statusDetail = state.status === undefined ? {} : { http_status: state.status };
    if (isFusionError(err) && err.code !== 'network_error' && err.code !== 'request_timeout') return err;
    if (deadline.aborted) return deadline.reason instanceof FusionError ? deadline.reason : new FusionError('request_timeout', `fetch deadline of ${String(callDeadlineMs)} ms passed`);
    if (caller?.aborted === true) {
      return new FusionError('network_error', 'fetch aborted by the caller', { cause: err, details: { aborted: true, ...statusDetail } });
    }
    if (isFusionError(err)) return err;
    const code = (err as { code?: unknown } | undefined)?.code;
    const message = err instanceof Error ? err.message : String(err);
    const where = state.host === undefined ? '' : ` (${state.host})`;
    if (typeof code === 'string' && TIMEOUT_CODES.has(code)) {
      return new FusionError('request_timeout', `fetch timed out${where}: ${message}`, { cause: err, details: { ...statusDetail } });
    }
    return new FusionError('network_error', `network error${where}: ${message}`, {
      cause: err,
      details: { ...statusDetail, ...(typeof code === 'string' ? { cause_code: code } : {}) },
    });
  }

  const guarded = async (request: GuardedFetchRequest, signal?: AbortSignal): Promise<GuardedFetchResult> => {
    const started = performance.now();
    const call = settingsFor(request.profile);
    const profile = request.profile === undefined ? {} : { profile: request.profile.name };
    const deadline = new AbortController();
    const timer = setTimeout(() => {
      deadline.abort(new FusionError('request_timeout', `fetch deadline of ${String(call.deadlineMs)} ms passed`, { details: { deadline_ms: call.deadlineMs } }));
    }, call.deadlineMs);
    const combined = signal === undefined ? deadline.signal : AbortSignal.any([deadline.signal, signal]);
    const state: HopState = { hop: 0, host: undefined, address: undefined, status: undefined };
    const scrub = headerScrubber(request.profile?.headers);
    try {
      const result = await run(request, combined, state, call);
      log.info(
        {
          ...profile,
          hop: state.hop,
          host: state.host,
          address: state.address,
          httpStatus: result.status,
          responseBytes: result.response_bytes,
          truncated: result.truncated,
          ...(result.cut === true ? { cut: true } : {}),
          ...(result.redirect === undefined ? {} : { redirect: scrub === undefined ? result.redirect : scrub(result.redirect) }),
          durationMs: Math.round(performance.now() - started),
        },
        'egress fetch done',
      );
      return result;
    } catch (err) {
      const error = typed(err, deadline.signal, signal, state, call.deadlineMs);
      if (scrub !== undefined) scrubError(error, scrub);
      const fields = {
        ...profile,
        code: error.code,
        hop: state.hop,
        host: state.host,
        address: typeof error.details.address === 'string' ? error.details.address : state.address,
        reason: typeof error.details.reason === 'string' ? error.details.reason : error.message,
        httpStatus: error.details.http_status,
        durationMs: Math.round(performance.now() - started),
      };
      if (POLICY_CODES.has(error.code)) log.info({ allow: false, ...fields }, 'egress decision');
      else log.info(fields, 'egress fetch failed');
      throw error;
    } finally {
      clearTimeout(timer);
    }
  };
  const staticRefusal = (url: string): FusionError | undefined => {
    try {
      vetHostStatically(parseFetchUrl(url), 0, { overrides, allowCidrs });
      return undefined;
    } catch (err) {
      return toFusionError(err, 'invalid_url');
    }
  };
  return Object.assign(guarded, { close: () => pool.close(), staticRefusal });
}

/** Profile `any-as-text`: whatever the label, the body is read as text (its charset still applies). */
function anyAsText(headers: IncomingHttpHeaders): ContentType {
  const raw = headers['content-type'];
  const parsed = typeof raw === 'string' ? parseContentType(raw) : undefined;
  return { mediaType: parsed?.mediaType ?? 'text/plain', charset: parsed?.charset };
}

function isFetchResult(value: unknown): value is FetchResult {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Partial<FetchResult>;
  return typeof v.url === 'string' && typeof v.final_url === 'string' && typeof v.content === 'string' && typeof v.content_sha256 === 'string';
}

/** Maps a fetch outcome (a result, or whatever was thrown) to the broker's wire answer. */
export function toFetchResponse(outcome: unknown): FetchResponse {
  if (isFetchResult(outcome)) return { ok: true, result: outcome };
  const error = toFusionError(outcome, 'network_error');
  const status = error.details.http_status;
  return {
    ok: false,
    error: {
      code: error.code,
      message: error.message,
      ...(typeof status === 'number' && Number.isSafeInteger(status) ? { http_status: status } : {}),
    },
  };
}

/** Adapts a guarded fetch to the broker's `BrokerFetcher` shape: never throws. */
export function toBrokerFetcher(fetch: GuardedFetch): (request: GuardedFetchRequest, signal: AbortSignal) => Promise<FetchResponse> {
  return async (request, signal) => {
    try {
      return toFetchResponse(await fetch(request, signal));
    } catch (err) {
      return toFetchResponse(err);
    }
  };
}
