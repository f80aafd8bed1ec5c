/**
 * Request/response plumbing shared by every route: bounded JSON bodies, the one error envelope
 * (the JSON reply itself is src/http/http-util.ts, shared with the broker).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ZodType } from 'zod';
import { FusionError, toFusionError } from '../errors.js';
import { sendJson as sendHttpJson } from '../http/http-util.js';

export const MAX_BODY_BYTES = 1024 * 1024;

export async function readJsonBody(req: IncomingMessage, maxBytes = MAX_BODY_BYTES): Promise<unknown> {
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of req) {
      const buf = chunk as Buffer;
      total += buf.length;
      if (total > maxBytes) throw new FusionError('payload_too_large', `request body exceeds ${maxBytes} bytes`, { details: { maxBytes } });
      chunks.push(buf);
    }
  } catch (err) {
    if (err instanceof FusionError) throw err;
    // The client hung up (or the body's framing broke) mid-body: its fault, not the daemon's.
    throw new FusionError('bad_request', `the request body was cut off before its end (${(err as Error).message.slice(0, 80)})`, { details: { field: 'body' } });
  }
  const bytes = Buffer.concat(chunks);
  let text: string;
  let badUtf8 = false;
  try {
    text = STRICT_UTF8.decode(bytes);
  } catch {
    // Never silently replaced: decoded leniently only to name the field that holds the bad bytes.
    badUtf8 = true;
    text = bytes.toString('utf8');
  }
  if (text.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (err) {
    if (badUtf8) throw new FusionError('invalid_input', 'request body is not valid UTF-8', { details: { field: 'body' } });
    throw new FusionError('invalid_input', `request body is not valid JSON: ${(err as Error).message}`, { details: { field: 'body' } });
  }
  // Every later walk (the checks below, validation, canonical JSON) recurses: bound it here.
  if (depthOf(value) > MAX_JSON_DEPTH) {
    throw new FusionError('invalid_input', `request body is nested deeper than ${MAX_JSON_DEPTH} levels`, { details: { field: 'body', maxDepth: MAX_JSON_DEPTH } });
  }
  if (badUtf8) {
    const field = findString(value, (s) => s.includes('\uFFFD')) ?? 'body';
    throw new FusionError('invalid_input', `${field} is not valid UTF-8`, { details: { field } });
  }
  // A NUL cannot be told from a C string's end by whatever reads the text next (files, argv, SQLite).
  const nul = findString(value, (s) => s.includes('\u0000'));
  if (nul !== undefined) throw new FusionError('invalid_input', `${nul} contains a NUL character`, { details: { field: nul } });
  // A JSON escape (\ud800) yields a lone surrogate from valid UTF-8 bytes: written as UTF-8
  // (prompts, task files) it would silently become U+FFFD, as invalid bytes are never allowed to.
  const lone = findString(value, (s) => LONE_SURROGATE.test(s));
  if (lone !== undefined) throw new FusionError('invalid_input', `${lone} contains an unpaired UTF-16 surrogate (not valid Unicode text)`, { details: { field: lone } });
  return value;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export const MAX_JSON_DEPTH = 64;

/** Nesting depth of a parsed JSON value, without recursion (stops counting past MAX_JSON_DEPTH). */
function depthOf(value: unknown): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (d + 1 > max) max = d + 1;
    if (max > MAX_JSON_DEPTH) return max;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** The dotted path of the first string (value or key) matching `bad`, if any. */
function findString(value: unknown, bad: (s: string) => boolean, path = ''): string | undefined {
  const name = (p: string): string => p || 'body';
  if (typeof value === 'string') return bad(value) ? name(path) : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const hit = findString(value[i], bad, path === '' ? String(i) : `${path}.${i}`);
      if (hit !== undefined) return hit;
    }
    return undefined;
  }
  if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const here = path === '' ? k : `${path}.${k}`;
      if (bad(k)) return name(here);
      const hit = findString(v, bad, here);
      if (hit !== undefined) return hit;
    }
  }
  return undefined;
}

/** Parses with a closed zod schema and reports every issue with its path. */
export function parseWith<T>(schema: ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((i) => ({ path: i.path.join('.') || '(root)', message: i.message }));
  const summary = issues.map((i) => `${i.path}: ${i.message}`).join('; ');
  throw new FusionError('invalid_input', `${what} is invalid: ${summary}`, { details: { issues } });
}

/** The one JSON reply (src/http/http-util.ts); routes answer nothing else. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  sendHttpJson(res, status, body);
}

export function sendError(res: ServerResponse, err: unknown): FusionError {
  const fe = toFusionError(err);
  // busy / storage_full say when to come back (RFC 9110 Retry-After, seconds).
  const retryAfter = fe.details.retryAfterSeconds;
  if (!res.headersSent && typeof retryAfter === 'number') res.setHeader('retry-after', String(retryAfter));
  if (!res.headersSent) sendJson(res, fe.httpStatus, fe.toEnvelope());
  else res.end();
  return fe;
}
