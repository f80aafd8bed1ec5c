/**
 * A Model Context Protocol server over stdio (JSON-RPC 2.0, one message per line) for local
 * coding agents. Task tools go to the daemon through FusionClient; research_run goes to the
 * research-run API with the session's workspace key; web_read/web_crawl/web_search run the
 * egress guard in this process (web-tools.ts).
 *
 * Each task this session submits gets its terminal event sent as a `notifications/message`, and
 * each research run it creates that has not ended yet gets one when it ends, so the agent waits
 * for a notification instead of polling. research_get, research_snapshots and research_list read
 * runs back with the same workspace key. A task submitted with a `progressToken` also gets
 * `notifications/progress` for that token (state changes, candidate tool-call counts, a
 * heartbeat) until it ends.
 *
 * One server can serve several repositories: a task tool's optional `repo` must resolve (symlinks
 * followed) inside a root the server was started with, so an agent cannot point the daemon at a
 * directory the person who configured the server did not offer.
 *
 * Hand-written rather than built on the SDK's server: the protocol surface used here (initialize,
 * ping, tools/list, tools/call, logging notifications) is small, it keeps the SDK a
 * test-only dependency, and the official SDK client drives this server in the conformance test.
 *
 * This file is the session: it reads the messages, bounds how many are handled at once, and
 * closes what the session started. The parts, one concern each: rpc-methods.ts (the JSON-RPC
 * methods), task-tool-calls.ts, research-tool-calls.ts and web-tool-calls.ts (the tools of each
 * family), task-notices.ts and run-notices.ts (the notifications), repo-roots.ts (which
 * repository a task tool may name), daemon-seams.ts (the egress seams the daemon must share),
 * session-output.ts (writing to the client).
 */
import type { Readable, Writable } from 'node:stream';
import type { FusionClient } from '../client/index.js';
import { daemonSeamsCheck, type EgressSeams } from './daemon-seams.js';
import { boundedLines, MCP_MAX_MESSAGE_BYTES } from './line-reader.js';
import { repoResolver } from './repo-roots.js';
import { researchToolCalls } from './research-tool-calls.js';
import { rpcMethods, type RpcRequest } from './rpc-methods.js';
import { startRunNotices } from './run-notices.js';
import { announcer, lineSender, outputDrained } from './session-output.js';
import { startTaskNotices } from './task-notices.js';
import { taskToolCalls } from './task-tool-calls.js';
import type { ToolHandler } from './tool-call.js';
import type { ToolName } from './tool-schemas.js';
import { webToolCalls } from './web-tool-calls.js';
import type { WebTools } from './web-tools.js';

export interface McpServerOptions {
  client: FusionClient;
  /** The repository of a task tool called without `repo`. */
  repo: string;
  /** Directories (real paths) a task tool's `repo` may lie in; the default repo is always allowed. */
  roots?: readonly string[];
  /**
   * The egress seams `fusion mcp` was started with (--resolve/--allow-cidr). research_run checks
   * that the daemon crawling the run has them too, rather than quietly crawling without them.
   */
  egressSeams?: EgressSeams;
  version: string;
  input: Readable;
  output: Writable;
  /** Workspace API key for research_run (FUSION_RESEARCH_API_KEY); absent → research_run is refused. */
  researchApiKey?: string;
  web: WebTools;
  /** Longest accepted message in bytes (default MCP_MAX_MESSAGE_BYTES; FUSION_MCP_MAX_MESSAGE_BYTES). */
  maxMessageBytes?: number;
  /** How often a submitted task that is silent gets a heartbeat progress notification (default 15 s). */
  progressHeartbeatMs?: number;
}

/** Requests (with an id) handled at once per session; the next is read when one is answered. */
export const MCP_MAX_CONCURRENT_REQUESTS = 64;

export async function serveMcp(options: McpServerOptions): Promise<void> {
  const { client, output } = options;
  const send = lineSender(output);
  const announce = announcer(send);
  const session = new AbortController();
  const tasks = startTaskNotices({ client, signal: session.signal, send, announce, heartbeatMs: options.progressHeartbeatMs ?? 15_000 });
  const runs = startRunNotices({ client, signal: session.signal, announce });
  const checkDaemonSeams = daemonSeamsCheck(client, options.egressSeams);
  const tools: Record<ToolName, ToolHandler> = {
    ...taskToolCalls({ client, resolveRepo: repoResolver(options.repo, [...(options.roots ?? [])]), checkDaemonSeams, notices: tasks }),
    ...researchToolCalls({ client, researchApiKey: options.researchApiKey, checkDaemonSeams, runs }),
    ...webToolCalls(options.web),
  };
  const methods = rpcMethods({ send, version: options.version, tools });

  // Requests being handled; a settled one leaves the set (a long session does not accumulate them).
  const pending = new Set<Promise<void>>();
  for await (const item of boundedLines(options.input, options.maxMessageBytes ?? MCP_MAX_MESSAGE_BYTES)) {
    // Backpressure: a client that does not read its replies is not read either (its requests
    // wait in the pipe, not in this process).
    await outputDrained(output);
    if (item.kind === 'oversized') {
      // The id is somewhere in the dropped bytes: the reply can only be addressed to null.
      send({ id: null, error: { code: -32600, message: `invalid request: message over the ${item.maxBytes}-byte limit; it was discarded up to its newline`, data: { maxBytes: item.maxBytes } } });
      continue;
    }
    const line = item.text;
    if (line.trim() === '') continue;
    let req: RpcRequest;
    try {
      req = JSON.parse(line) as RpcRequest;
    } catch {
      send({ id: null, error: { code: -32700, message: 'parse error: each line must be one JSON-RPC message' } });
      continue;
    }
    if (typeof req !== 'object' || req === null || typeof req.method !== 'string') {
      if (typeof req === 'object' && req !== null && 'id' in req && !('result' in req || 'error' in req)) send({ id: (req as { id?: unknown }).id ?? null, error: { code: -32600, message: 'invalid request: method must be a string' } });
      continue;
    }
    // A handler must never reject: an unhandled rejection would end the whole session.
    // At most MCP_MAX_CONCURRENT_REQUESTS requests are handled at once, so a burst of small ones
    // cannot queue unbounded replies before the output fills; notifications (a cancel) never wait.
    if (req.id !== undefined) while (pending.size >= MCP_MAX_CONCURRENT_REQUESTS) await Promise.race(pending);
    const handled: Promise<void> = methods.handle(req)
      .catch(() => {
        if (req.id !== undefined) send({ id: req.id ?? null, error: { code: -32603, message: 'internal error' } });
      })
      .finally(() => pending.delete(handled));
    pending.add(handled);
  }
  await Promise.allSettled(pending);
  const tasksClosed = tasks.close();
  session.abort();
  methods.abortInflight();
  await runs.close();
  await tasksClosed;
}
