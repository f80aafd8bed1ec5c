/**
 * The scriptable core of the fake model servers (fake-openai.ts, fake-anthropic.ts): a real
 * node:http server on 127.0.0.1 (port 0) that records every request it receives and answers
 * from a queue of scripted replies, then from a fallback.
 *
 * A reply can be delayed, can hang before its headers or halfway through its body (to prove
 * timeouts), or be a raw (malformed) body. Only loopback is ever used.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  /** Path with query, e.g. `/v1/chat/completions`. */
  path: string;
  headers: IncomingHttpHeaders;
  rawBody: string;
  /** The parsed JSON body (`undefined` when it was not JSON). */
  body: unknown;
  /** `Date.now()` when the request finished arriving. */
  receivedAt: number;
}

export interface FakeReply {
  status?: number;
  headers?: Record<string, string>;
  /** JSON body (serialised). */
  json?: unknown;
  /** Raw body text, sent as is (malformed JSON, HTML error pages…). */
  raw?: string;
  /** Wait before answering. */
  delayMs?: number;
  /** Never answer (`headers`), or send headers and part of the body and stall (`body`). */
  hang?: 'headers' | 'body';
}

/** A scripted step: a fixed reply or a function of the request (index = 0-based request number). */
export type FakeStep = FakeReply | ((req: RecordedRequest, index: number) => FakeReply | Promise<FakeReply>);

export interface FakeServerOptions {
  /** The one POST path this server implements; anything else is answered by `notFound`. */
  route: string;
  /** Answer used when the script is exhausted. */
  fallback: FakeStep;
  /** Checks auth/version headers; a reply here short-circuits the script (the step is not consumed). */
  gate?: (req: RecordedRequest) => FakeReply | null;
  notFound: (req: RecordedRequest) => FakeReply;
}

export interface FakeServer {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** Every request received, in arrival order (including gated and unknown-route ones). */
  requests: RecordedRequest[];
  /** Bodies of the requests that reached `route`, parsed. */
  bodies(): unknown[];
  /** Appends scripted steps (consumed one per request to `route`). */
  script(...steps: FakeStep[]): void;
  /** Replaces the fallback. */
  setFallback(step: FakeStep): void;
  /** Scripted steps not yet consumed. */
  pending(): number;
  close(): Promise<void>;
}

function send(res: ServerResponse, reply: FakeReply): void {
  const status = reply.status ?? 200;
  const text = reply.raw ?? (reply.json === undefined ? '' : JSON.stringify(reply.json));
  const headers: Record<string, string> = {
    ...(reply.raw === undefined && reply.json !== undefined ? { 'content-type': 'application/json' } : {}),
    ...reply.headers,
  };
  if (reply.hang === 'body') {
    res.writeHead(status, { ...headers, 'content-length': String(Buffer.byteLength(text) + 100) });
    res.write(text.slice(0, Math.max(1, Math.floor(text.length / 2))));
    return; // never ends
  }
  res.writeHead(status, { ...headers, 'content-length': String(Buffer.byteLength(text)) });
  res.end(text);
}

export async function startFakeServer(options: FakeServerOptions): Promise<FakeServer> {
  const requests: RecordedRequest[] = [];
  const routed: RecordedRequest[] = [];
  const steps: FakeStep[] = [];
  let fallback = options.fallback;
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const rawBody = Buffer.concat(chunks).toString('utf8');
    let body: unknown;
    try {
      body = JSON.parse(rawBody);
    } catch {
      body = undefined;
    }
    const rec: RecordedRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, rawBody, body, receivedAt: Date.now() };
    requests.push(rec);
    if (rec.method !== 'POST' || rec.path !== options.route) {
      send(res, options.notFound(rec));
      return;
    }
    const gated = options.gate?.(rec) ?? null;
    if (gated !== null) {
      send(res, gated);
      return;
    }
    const index = routed.length;
    routed.push(rec);
    const step = steps.shift() ?? fallback;
    const reply = typeof step === 'function' ? await step(rec, index) : step;
    if (reply.hang === 'headers') return;
    // A slow upstream is what a delayed reply is for.
    if (reply.delayMs !== undefined) await new Promise((r) => setTimeout(r, reply.delayMs));
    if (!res.destroyed) send(res, reply);
  };
  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) send(res, { status: 500, json: { error: { message: `fake server bug: ${String(err)}` } } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    bodies: () => routed.map((r) => r.body),
    script: (...more) => void steps.push(...more),
    setFallback: (step) => {
      fallback = step;
    },
    pending: () => steps.length,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
