/**
 * Request/response plumbing shared by every route: bounded JSON bodies, the one error envelope.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ZodType } from 'zod';
import { FusionError, toFusionError } from '../errors.js';

export const MAX_BODY_BYTES = 1024 * 1024;

export async function readJsonBody(req: IncomingMessage, maxBytes = MAX_BODY_BYTES): Promise<unknown> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of req) {
    const buf = chunk as Buffer;
    total += buf.length;
    if (total > maxBytes) throw new FusionError('payload_too_large', `request body exceeds ${maxBytes} bytes`, { details: { maxBytes } });
    chunks.push(buf);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new FusionError('invalid_input', `request body is not valid JSON: ${(err as Error).message}`, { details: { field: 'body' } });
  }
}

/** Parses with a closed zod schema and reports every issue with its path. */
export function parseWith<T>(schema: ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((i) => ({ path: i.path.join('.') || '(root)', message: i.message }));
  const summary = issues.map((i) => `${i.path}: ${i.message}`).join('; ');
  throw new FusionError('invalid_input', `${what} is invalid: ${summary}`, { details: { issues } });
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export function sendError(res: ServerResponse, err: unknown): FusionError {
  const fe = toFusionError(err);
  if (!res.headersSent) sendJson(res, fe.httpStatus, fe.toEnvelope());
  else res.end();
  return fe;
}
