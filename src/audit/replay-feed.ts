/**
 * The host end of a streamed replay: a small HTTP server on a Unix socket, bound into the replay
 * sandbox where a candidate's broker socket would be. It serves the tool calls the model has
 * asked for so far (`GET /calls?after=N`, long-polled), so the replay runs while the candidate
 * is still working, and says `done` once the candidate's broker has closed.
 */
import { chmod, chown } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { RawToolCall } from './replay.js';

const POLL_MS = 20;
const HOLD_MS = 20_000;

export interface ReplayFeed {
  /** No more calls will come: pending and later polls answer `done`. */
  markDone(): void;
  close(): Promise<void>;
}

export async function startReplayFeed(socketPath: string, owner: { uid: number; gid: number } | null, calls: () => readonly RawToolCall[]): Promise<ReplayFeed> {
  let done = false;
  const timers = new Set<NodeJS.Timeout>();
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://replay.local');
    const after = Number(url.searchParams.get('after') ?? '0');
    if (req.method !== 'GET' || url.pathname !== '/calls' || !Number.isSafeInteger(after) || after < 0) {
      res.writeHead(404).end();
      return;
    }
    const started = Date.now();
    const answer = (): void => {
      const list = calls();
      if (list.length > after || done || Date.now() - started > HOLD_MS) {
        const batch = list.slice(after).map((c, i) => ({ index: after + i, name: c.name, arguments: c.arguments }));
        const body = JSON.stringify({ calls: batch, done: done && batch.length === 0 });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
        return;
      }
      const timer = setTimeout(() => {
        timers.delete(timer);
        answer();
      }, POLL_MS);
      timers.add(timer);
    };
    answer();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  await chmod(socketPath, 0o600);
  if (owner !== null) await chown(socketPath, owner.uid, owner.gid);
  return {
    markDone: () => {
      done = true;
    },
    close: async () => {
      done = true;
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
