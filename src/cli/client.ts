/**
 * Socket API client used by the CLI (and usable by any local agent): HTTP/1.1 over the
 * daemon's Unix socket.
 */
import { request } from 'node:http';
import type { Socket } from 'node:net';
import { FusionError, isErrorCode } from '../errors.js';

const guarded = new WeakSet<Socket>();
function guardSocket(socket: Socket): void {
  if (guarded.has(socket)) return;
  guarded.add(socket);
  socket.on('error', () => undefined);
}

export interface ApiReply {
  status: number;
  body: unknown;
}

export class FusionClient {
  constructor(readonly socketPath: string) {}

  async call(method: string, path: string, body?: unknown, timeoutMs = 15 * 60_000): Promise<unknown> {
    const reply = await this.raw(method, path, body, timeoutMs);
    if (reply.status >= 400) throw envelopeError(reply);
    return reply.body;
  }

  raw(method: string, path: string, body?: unknown, timeoutMs = 15 * 60_000, headers: Record<string, string> = {}): Promise<ApiReply> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    return new Promise((resolve, reject) => {
      const req = request(
        {
          socketPath: this.socketPath,
          method,
          path,
          headers: { ...headers, ...(payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {}) },
          timeout: timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown = text;
            try {
              parsed = text === '' ? null : (JSON.parse(text) as unknown);
            } catch {
              /* keep text */
            }
            resolve({ status: res.statusCode ?? 0, body: parsed });
          });
          res.on('error', reject);
        },
      );
      // The daemon may close right after replying while a large body is still being written:
      // that EPIPE belongs to this request (already answered or failed), not to the process.
      req.on('socket', guardSocket);
      req.on('timeout', () => req.destroy(new Error(`request to the daemon timed out after ${timeoutMs} ms`)));
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') {
          reject(new FusionError('daemon_unavailable', `no fusion daemon answers on ${this.socketPath}; start one with 'fusion daemon' (or use --wait, which runs one for the task)`, { cause: err }));
        } else reject(err);
      });
      if (payload) req.write(payload);
      req.end();
    });
  }

  /** Streams NDJSON events; resolves when the stream ends. */
  stream(path: string, onEvent: (event: Record<string, unknown>) => void, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const req = request({ socketPath: this.socketPath, method: 'GET', path, signal }, (res) => {
        if ((res.statusCode ?? 0) >= 400) {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            let body: unknown = null;
            try {
              body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
            } catch {
              /* ignore */
            }
            reject(envelopeError({ status: res.statusCode ?? 0, body }));
          });
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
            if (line.trim()) onEvent(JSON.parse(line) as Record<string, unknown>);
          }
        });
        res.on('end', () => resolve());
        res.on('error', reject);
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (err.name === 'AbortError') resolve();
        else reject(err);
      });
      req.end();
    });
  }

  async ping(): Promise<boolean> {
    try {
      const r = await this.raw('GET', '/v1/health', undefined, 3_000);
      return r.status === 200;
    } catch {
      return false;
    }
  }
}

export function envelopeError(reply: ApiReply): FusionError {
  const env = reply.body as { error?: { code?: string; message?: string; details?: Record<string, unknown> } } | null;
  const code = env?.error?.code;
  const message = env?.error?.message ?? `daemon answered HTTP ${reply.status}`;
  return new FusionError(code && isErrorCode(code) ? code : 'internal_error', message, { details: env?.error?.details ?? {} });
}
