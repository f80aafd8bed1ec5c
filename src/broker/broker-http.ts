/**
 * HTTP plumbing of the broker socket: bounded body reading, JSON answers, the error envelope,
 * and the redaction applied to anything provider-originated before a child sees it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ZodType } from 'zod';
import { FusionError, isErrorCode, type ErrorCode } from '../errors.js';
import { redactSecrets } from '../contracts/secret-redaction.js';
import { describeIssues } from './wire-schema.js';
import { sendJson as sendHttpJson } from '../http/http-util.js';

export class BodyTooLarge extends Error {}

export function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > maxBytes) {
      reject(new BodyTooLarge());
      return;
    }
    const chunks: Buffer[] = [];
    let bytes = 0;
    let done = false;
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      bytes += chunk.length;
      if (bytes > maxBytes) {
        done = true;
        reject(new BodyTooLarge());
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (done) return;
      done = true;
      resolve(Buffer.concat(chunks));
    });
    req.on('error', (err) => {
      if (done) return;
      done = true;
      reject(err);
    });
    // A child that hangs up mid-body must not leave the request queue waiting forever.
    req.on('close', () => {
      if (done) return;
      done = true;
      reject(new Error('request closed before its body was complete'));
    });
  });
}

/** One request per connection: every broker reply closes it. */
export function sendJson(res: ServerResponse, status: number, body: unknown): number {
  return sendHttpJson(res, status, body, { close: true });
}

/** The wire envelope for a broker-side failure; details are dropped (they may hold provider data). */
export function sendError(res: ServerResponse, error: FusionError, status = error.httpStatus): number {
  return sendJson(res, status, { error: { code: error.code, message: redactSecrets(error.message), details: {} } });
}

export function parseJsonBody<T>(bytes: Buffer, schema: ZodType<T>, what: string): T {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new FusionError('invalid_input', `${what} body is not valid JSON`);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new FusionError('invalid_input', `${what} body is invalid: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

export function asFusionError(err: unknown, fallback: ErrorCode): FusionError {
  if (err instanceof FusionError) return err;
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  const message = err instanceof Error ? err.message : String(err);
  return new FusionError(typeof code === 'string' && isErrorCode(code) ? code : fallback, message, { cause: err });
}

export function httpStatusOf(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 100 && value <= 599 ? value : undefined;
}

export function hostOf(url: string): string | undefined {
  try {
    return new URL(url).hostname;
  } catch {
    return undefined;
  }
}
