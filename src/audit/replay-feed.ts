/**
 * The host end of a task's streamed replay: a small HTTP server on a Unix socket, bound into the
 * replay sandbox where a candidate's broker socket would be. One replay sandbox serves every
 * candidate attempt of a task, each attempt a named stream of calls:
 *
 *   GET  /events?after=N       (long-polled) the events after the N-th: a call the model of a
 *                              stream asked for, `{ stream, index, name, arguments }`, or the end
 *                              of a stream, `{ stream, end: true, discard }` (discard: the
 *                              attempt was abandoned, its queued calls need no replay); `done`
 *                              once no stream will ever come again
 *   POST /results?stream=S     the replay's answer for a stream that ended (its replayed calls)
 *
 * Events are numbered in the order the host saw them, across streams, so the replay works on
 * the calls of all candidates as they come.
 */
import { chmod, chown } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { RawToolCall } from './replay.js';

const POLL_MS = 20;
const HOLD_MS = 20_000;

export type FeedEvent =
  | { stream: string; index: number; name: string; arguments: string }
  | { stream: string; end: true; discard: boolean };

interface FeedStream {
  name: string;
  calls: () => readonly RawToolCall[];
  /** How many of its calls are in the event list. */
  sent: number;
  ended: 'no' | 'yes' | 'discard';
  endSent: boolean;
}

export interface ReplayFeed {
  /** Starts feeding the calls of one attempt; its name must be new. */
  open(stream: string, calls: () => readonly RawToolCall[]): void;
  /** No call of `stream` will come any more (discard: its results are not wanted). */
  end(stream: string, discard?: boolean): void;
  /** No stream will be opened any more: once every event is taken, polls answer `done`. */
  markDone(): void;
  close(): Promise<void>;
}

export interface FeedOptions {
  owner: { uid: number; gid: number } | null;
  /** A stream's results arrived (the raw JSON text, at most `maxResultBytes`). */
  onResults: (stream: string, text: string) => void;
  /** Any request from the replay (it is alive: the launcher's idle timer is reset). */
  onActivity?: () => void;
  maxResultBytes: number;
}

function readBody(req: IncomingMessage, max: number): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) {
        resolve(null);
        req.destroy();
      } else {
        chunks.push(c);
      }
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export async function startReplayFeed(socketPath: string, options: FeedOptions): Promise<ReplayFeed> {
  let done = false;
  const streams = new Map<string, FeedStream>();
  const events: FeedEvent[] = [];
  const timers = new Set<NodeJS.Timeout>();
  /** Appends what each stream has added since the last look (calls in order, then its end). */
  const collect = (): void => {
    for (const s of streams.values()) {
      if (s.endSent) continue;
      if (s.ended !== 'discard') {
        const list = s.calls();
        for (; s.sent < list.length; s.sent += 1) {
          const c = list[s.sent]!;
          events.push({ stream: s.name, index: s.sent, name: c.name, arguments: c.arguments });
        }
      }
      if (s.ended !== 'no') {
        events.push({ stream: s.name, end: true, discard: s.ended === 'discard' });
        s.endSent = true;
      }
    }
  };
  const server: Server = createServer((req, res) => {
    options.onActivity?.();
    const url = new URL(req.url ?? '/', 'http://replay.local');
    if (req.method === 'POST' && url.pathname === '/results') {
      const stream = url.searchParams.get('stream') ?? '';
      readBody(req, options.maxResultBytes).then((text) => {
        if (text === null || !streams.has(stream)) {
          res.writeHead(400).end();
          return;
        }
        options.onResults(stream, text);
        res.writeHead(204).end();
      }, () => res.writeHead(400).end());
      return;
    }
    const after = Number(url.searchParams.get('after') ?? '0');
    if (req.method !== 'GET' || url.pathname !== '/events' || !Number.isSafeInteger(after) || after < 0) {
      res.writeHead(404).end();
      return;
    }
    const started = Date.now();
    const answer = (): void => {
      collect();
      if (events.length > after || done || Date.now() - started > HOLD_MS) {
        const batch = events.slice(after);
        const body = JSON.stringify({ events: batch, done: done && batch.length === 0 });
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
  if (options.owner !== null) await chown(socketPath, options.owner.uid, options.owner.gid);
  return {
    open(stream, calls) {
      if (streams.has(stream)) throw new Error(`replay stream ${stream} is already open`);
      streams.set(stream, { name: stream, calls, sent: 0, ended: 'no', endSent: false });
    },
    end(stream, discard = false) {
      const s = streams.get(stream);
      if (s !== undefined && s.ended === 'no') s.ended = discard ? 'discard' : 'yes';
    },
    markDone: () => {
      // Every open stream ends first, so no event can follow `done`.
      for (const s of streams.values()) if (s.ended === 'no') s.ended = 'discard';
      collect();
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
