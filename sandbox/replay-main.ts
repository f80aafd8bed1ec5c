/**
 * Entry point of a replay sandbox: the same sandbox policy and limits as a candidate.
 *   1. read /run/fusion/request.json: { schema_version, tools, calls? , feed? }
 *   2. replay each repository tool call over /repo (sandbox/replay-core.ts): the listed `calls`,
 *      or, with `feed: true`, the calls of every candidate attempt of the task, which the
 *      supervisor streams over /run/fusion/broker.sock while the candidates are still running
 *      (src/audit/replay-feed.ts: `GET /events?after=N`, each attempt a named stream)
 *      (directories and files read once for all calls: /repo cannot change, sandbox/tools/repo-memo.ts;
 *      a call identical to one replayed before, in any stream, is answered by that replay, unless
 *      a wall-clock limit cut it: replay-core.ts onceForSameCalls)
 *   3. listed calls: write /out/replay.json: { schema_version, calls: [ReplayedCall…] } (O_EXCL, fsynced);
 *      fed calls: when a stream ends, `POST /results?stream=S` with the same body
 * Exit 0 when every answer is delivered, 1 otherwise (the reason on stderr). Node builtins only.
 */
import { closeSync, constants, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs';
import { request } from 'node:http';
import { REPLAY_SCHEMA, createReplayer, onceForSameCalls, replayToolLimits, type ReplayCall, type ReplayedCall } from './replay-core.js';
import { memoizeRepositoryReads } from './tools/repo-memo.js';

const PATHS = { repo: '/repo', out: '/out/replay.json', request: '/run/fusion/request.json', feed: '/run/fusion/broker.sock' } as const;
const MAX_REQUEST_BYTES = 32 * 1024 * 1024;
const MAX_FEED_BYTES = 64 * 1024 * 1024;

function fail(message: string): never {
  process.stderr.write(`fusion replay: ${message}\n`);
  process.exit(1);
}

function asCall(c: unknown): ReplayCall {
  const call = c as Partial<ReplayCall>;
  if (typeof call.ordinal !== 'number' || typeof call.tool_name !== 'string' || typeof call.arguments !== 'string') fail('malformed call');
  return { ordinal: call.ordinal, tool_name: call.tool_name, arguments: call.arguments };
}

function readRequest(): { tools: string[]; calls: ReplayCall[]; feed: boolean } {
  const bytes = readFileSync(PATHS.request);
  if (bytes.length > MAX_REQUEST_BYTES) fail('request too large');
  const value = JSON.parse(bytes.toString('utf8')) as { schema_version?: unknown; tools?: unknown; calls?: unknown; feed?: unknown };
  if (value.schema_version !== REPLAY_SCHEMA) fail('unexpected request schema');
  if (!Array.isArray(value.tools) || !value.tools.every((t) => typeof t === 'string')) fail('tools must be a list of names');
  const feed = value.feed === true;
  if (!feed && !Array.isArray(value.calls)) fail('calls must be a list');
  return { tools: value.tools as string[], calls: feed ? [] : (value.calls as unknown[]).map(asCall), feed };
}

type FeedEvent = { stream: string; index: number; name: string; arguments: string } | { stream: string; end: true; discard: boolean };

/** One long-poll for the events after `after`. */
function pull(after: number): Promise<{ events: FeedEvent[]; done: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: PATHS.feed, path: `/events?after=${after}`, method: 'GET' }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_FEED_BYTES) req.destroy(new Error('feed answer too large'));
        else chunks.push(c);
      });
      res.on('end', () => {
        try {
          if (res.statusCode !== 200) throw new Error(`feed answered ${String(res.statusCode)}`);
          resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as { events: FeedEvent[]; done: boolean });
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** Sends the replayed calls of a stream that ended. */
function post(stream: string, calls: readonly ReplayedCall[]): Promise<void> {
  const body = `${JSON.stringify({ schema_version: REPLAY_SCHEMA, calls })}\n`;
  return new Promise((resolve, reject) => {
    const req = request({
      socketPath: PATHS.feed, path: `/results?stream=${encodeURIComponent(stream)}`, method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 204 ? resolve() : reject(new Error(`results for ${stream} answered ${String(res.statusCode)}`))));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The calls of every stream as they come; each stream's results are sent when it ends. */
async function replayFeed(replay: (call: ReplayCall) => Promise<ReplayedCall | null>): Promise<void> {
  const streams = new Map<string, { next: number; calls: ReplayedCall[] }>();
  let after = 0;
  for (;;) {
    const batch = await pull(after);
    after += batch.events.length;
    // An attempt abandoned in this batch needs none of its queued calls.
    const dropped = new Set(batch.events.filter((e) => 'end' in e && e.discard).map((e) => e.stream));
    for (const e of batch.events) {
      let s = streams.get(e.stream);
      if (s === undefined) {
        s = { next: 0, calls: [] };
        streams.set(e.stream, s);
      }
      if ('end' in e) {
        if (!e.discard) await post(e.stream, s.calls);
        streams.delete(e.stream);
        continue;
      }
      if (e.index !== s.next) fail(`feed skipped from call ${s.next} to ${e.index} of ${e.stream}`);
      s.next += 1;
      if (dropped.has(e.stream)) continue;
      const done = await replay({ ordinal: e.index, tool_name: e.name, arguments: e.arguments });
      if (done !== null) s.calls.push(done);
    }
    if (batch.done && batch.events.length === 0) return;
  }
}

async function main(): Promise<void> {
  const request = readRequest();
  // /repo is the task's snapshot, immutable and mounted read-only: each directory and file is
  // read once for all the calls replayed here (sandbox/tools/repo-memo.ts).
  memoizeRepositoryReads();
  const replay = onceForSameCalls(createReplayer(PATHS.repo, request.tools, replayToolLimits()));
  if (request.feed) {
    // Streamed: each call is replayed while its candidate is still thinking about the next one.
    await replayFeed(replay);
    return;
  }
  const calls: ReplayedCall[] = [];
  for (const call of request.calls) {
    const done = await replay(call);
    if (done !== null) calls.push(done);
  }
  const fd = openSync(PATHS.out, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    writeSync(fd, `${JSON.stringify({ schema_version: REPLAY_SCHEMA, calls })}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

main().catch((err: unknown) => fail(err instanceof Error ? err.message : String(err)));
