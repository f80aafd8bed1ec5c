/**
 * Entry point of a replay sandbox: the same sandbox policy and limits as a candidate.
 *   1. read /run/fusion/request.json: { schema_version, tools, calls? , feed? }
 *   2. replay each repository tool call over /repo (sandbox/replay-core.ts): the listed `calls`,
 *      or, with `feed: true`, the calls the supervisor streams over /run/fusion/broker.sock while
 *      the candidate is still running (`GET /calls?after=N` → { calls: [{index, name, arguments}], done })
 *      (directories and files read once for all calls: /repo cannot change, sandbox/tools/repo-memo.ts)
 *   3. write /out/replay.json: { schema_version, calls: [ReplayedCall…] } (O_EXCL, fsynced)
 * Exit 0 when the file is written, 1 otherwise (the reason on stderr). Node builtins only.
 */
import { closeSync, constants, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs';
import { request } from 'node:http';
import { REPLAY_SCHEMA, createReplayer, type ReplayCall, type ReplayedCall } from './replay-core.js';
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

/** One long-poll for the calls after `after`. */
function pull(after: number): Promise<{ calls: Array<{ index: number; name: string; arguments: string }>; done: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: PATHS.feed, path: `/calls?after=${after}`, method: 'GET' }, (res) => {
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
          resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as { calls: Array<{ index: number; name: string; arguments: string }>; done: boolean });
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

async function main(): Promise<void> {
  const request = readRequest();
  // /repo is the task's snapshot, immutable and mounted read-only: each directory and file is
  // read once for all the calls replayed here (sandbox/tools/repo-memo.ts).
  memoizeRepositoryReads();
  const replay = createReplayer(PATHS.repo, request.tools);
  const calls: ReplayedCall[] = [];
  if (request.feed) {
    // Streamed: each call is replayed while the candidate is still thinking about the next one.
    let next = 0;
    for (;;) {
      const batch = await pull(next);
      for (const c of batch.calls) {
        if (c.index !== next) fail(`feed skipped from call ${next} to ${c.index}`);
        next += 1;
        const done = await replay({ ordinal: c.index, tool_name: c.name, arguments: c.arguments });
        if (done !== null) calls.push(done);
      }
      if (batch.done && batch.calls.length === 0) break;
    }
  } else {
    for (const call of request.calls) {
      const done = await replay(call);
      if (done !== null) calls.push(done);
    }
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
