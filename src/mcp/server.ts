/**
 * A Model Context Protocol server over stdio (JSON-RPC 2.0, one message per line) for local
 * coding agents. Task tools go to the daemon through FusionClient; research_run goes to the
 * research-run API with the session's workspace key; web_read/web_crawl/web_search run the
 * egress guard in this process (web-tools.ts).
 *
 * Each task this session submits gets its terminal event sent as a `notifications/message`, and
 * each research run it creates gets one when the run ends, so the agent waits for a notification
 * instead of polling. A task submitted with a `progressToken` also gets `notifications/progress`
 * for that token (state changes, candidate tool-call counts, a heartbeat) until it ends.
 *
 * Hand-written rather than built on the SDK's server: the protocol surface used here (initialize,
 * ping, tools/list, tools/call, logging notifications) is small, it keeps the SDK a
 * test-only dependency, and the official SDK client drives this server in the conformance test.
 */
import type { Readable, Writable } from 'node:stream';
import type { z } from 'zod';
import { FusionError, toFusionError } from '../errors.js';
import type { FusionClient } from '../client/index.js';
import type { BgResult, ResearchRunView, TaskView } from '../client/types.js';
import { parseWith } from '../api/http-util.js';
import { readableHere } from '../common/readable.js';
import { RESEARCH_RUN_STATUSES } from '../contracts/research.js';
import { MCP_TOOLS, TOOL_CONTRACTS, isToolName, type ToolName } from './tool-schemas.js';
import type { WebTools } from './web-tools.js';
import { boundedLines, MCP_MAX_MESSAGE_BYTES } from './line-reader.js';
import { TaskProgress } from '../client/task-progress.js';

/** Newest first; an initialize asking for another version gets the newest. */
export const MCP_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'] as const;
export const MCP_PROTOCOL_VERSION = MCP_PROTOCOL_VERSIONS[0];

/** How often a created research run is looked at until it ends (the API has no event stream). */
const RUN_POLL_MS = 250;

interface RpcRequest {
  jsonrpc: '2.0';
  id?: number | string | null;
  method: string;
  params?: Record<string, unknown>;
}

export interface McpServerOptions {
  client: FusionClient;
  repo: string;
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

type ToolResult = Record<string, unknown>;

function textResult(text: string, structured: unknown, isError = false): ToolResult {
  return { content: [{ type: 'text', text }], structuredContent: structured, isError };
}

function taskLine(task: TaskView): string {
  const err = task.error ? ` — ${task.error.code} (while ${task.error.state}): ${task.error.message}` : '';
  return `Task ${task.taskId} (${task.workflow}) is ${task.state} (${task.status})${err}.`;
}

function runLine(run: ResearchRunView): string {
  const err = run.error ? ` — ${run.error}` : '';
  const doc = run.resultDocumentId ? ` Document ${run.resultDocumentId}.` : '';
  return `Research run ${run.id} is ${run.status}${err}.${doc}`;
}

const TERMINAL_RUN: ReadonlySet<string> = new Set(RESEARCH_RUN_STATUSES.filter((s) => s !== 'queued' && s !== 'running'));

/** Requests (with an id) handled at once per session; the next is read when one is answered. */
export const MCP_MAX_CONCURRENT_REQUESTS = 64;

/** Resolves once `output` has room again (or can take no more writes at all). */
function outputDrained(output: Writable): Promise<void> {
  if (!output.writableNeedDrain || output.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      output.off('drain', done);
      output.off('close', done);
      output.off('error', done);
      resolve();
    };
    output.on('drain', done);
    output.on('close', done);
    output.on('error', done);
  });
}

export async function serveMcp(options: McpServerOptions): Promise<void> {
  const { client, repo, output, web } = options;
  const send = (message: Record<string, unknown>): void => void output.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
  const announce = (data: unknown): void => send({ method: 'notifications/message', params: { level: 'info', logger: 'fusion', data } });
  const session = new AbortController();
  const inflight = new Map<string | number, AbortController>();

  // One event stream for the whole session; only tasks this session submitted are announced.
  const submitted = new Set<string>();
  // A fast task can finish before its receipt reply is processed: keep recent terminals briefly.
  const recentTerminals = new Map<string, unknown>();
  // Tasks submitted with a progressToken: each event (state change, candidate attempt, tool-call
  // count) becomes a notifications/progress for that token, and a silent one a heartbeat, until
  // it ends (the same lines as the CLI's --wait, src/client/task-progress.ts).
  const progressOf = new Map<string, { token: string | number; progress: TaskProgress }>();
  const sendProgress = (entry: { token: string | number; progress: TaskProgress }, message: string): void =>
    send({ method: 'notifications/progress', params: { progressToken: entry.token, progress: entry.progress.count, message } });
  const heartbeat = setInterval(() => {
    for (const entry of progressOf.values()) {
      entry.progress.count += 1;
      sendProgress(entry, entry.progress.heartbeat(Date.now()));
    }
  }, options.progressHeartbeatMs ?? 15_000);
  heartbeat.unref();
  const watch = (async () => {
    for await (const event of client.allEvents({ signal: session.signal })) {
      const tracked = progressOf.get(event.taskId);
      if (tracked !== undefined) {
        const line = tracked.progress.update(event);
        if (line !== undefined) sendProgress(tracked, line);
        if (event.kind === 'terminal') progressOf.delete(event.taskId);
      }
      if (event.kind !== 'terminal') continue;
      if (submitted.has(event.taskId)) {
        announce(event.data);
        continue;
      }
      recentTerminals.set(event.taskId, event.data);
      if (recentTerminals.size > 256) recentTerminals.delete(recentTerminals.keys().next().value as string);
    }
  })().catch(() => undefined);

  const runWatches: Array<Promise<void>> = [];
  const watchRun = (run: ResearchRunView): void => {
    const follow = async (): Promise<void> => {
      let current = run;
      while (!TERMINAL_RUN.has(current.status)) {
        await new Promise((resolve) => setTimeout(resolve, RUN_POLL_MS));
        if (session.signal.aborted) return;
        current = await client.getRun(run.id, { apiKey: options.researchApiKey! });
      }
      announce({ runId: current.id, status: current.status, error: current.error, resultDocumentId: current.resultDocumentId, summary: runLine(current) });
    };
    // Sent after the tool's reply, even when the run had already ended (direct dispatch).
    runWatches.push(new Promise<void>((resolve) => setImmediate(() => void follow().catch(() => undefined).finally(resolve))));
  };

  const args = <T>(name: ToolName, raw: unknown): T => parseWith(TOOL_CONTRACTS[name] as unknown as z.ZodType<T>, raw ?? {}, `${name} arguments`);

  /** An artifact this process cannot open (a socket-group member; another host's copy) comes over the socket. */
  const artifactText = async (id: string, path: string | undefined, sha256: string): Promise<string> => {
    if (path !== undefined && readableHere(path)) return `The answer is stored at ${path} (delivery: artifact).`;
    return (await client.answer(id, sha256)).toString('utf8');
  };

  const callTool = async (name: ToolName, raw: unknown, signal: AbortSignal, progressToken?: string | number): Promise<ToolResult> => {
    switch (name) {
      case 'fusion_investigate':
      case 'fusion_research': {
        // The daemon validates the arguments (the contract's exact messages).
        const receipt = await client.submit(name === 'fusion_investigate' ? 'investigate' : 'research', raw, { repo });
        submitted.add(receipt.taskId);
        if (progressToken !== undefined && recentTerminals.get(receipt.taskId) === undefined) progressOf.set(receipt.taskId, { token: progressToken, progress: new TaskProgress(receipt.taskId, receipt.createdAt) });
        const early = recentTerminals.get(receipt.taskId);
        if (early !== undefined) setImmediate(() => announce(early));
        return textResult(receipt.text, receipt);
      }
      case 'bg_result': {
        const a = args<{ taskId: string; delivery?: 'auto' | 'inline' | 'artifact' }>(name, raw);
        const id = a.taskId.trim();
        const result: BgResult = await client.result(id, { delivery: a.delivery ?? 'auto' });
        const answer = result.answer;
        const text = answer.present
          ? `${answer.header}\n\n${answer.text ?? (await artifactText(id, answer.path, answer.sha256))}`
          : result.status === 'running'
            ? `Task ${id} is still running. Wait for the terminal notification. Do not poll.`
            : `Task ${id} ${result.status}: no answer was committed.${result.error ? ` ${result.error.code}: ${result.error.message}` : ''}`;
        return textResult(text, result, !answer.present && result.status !== 'running');
      }
      case 'bg_status': {
        const task = await client.status(args<{ taskId: string }>(name, raw).taskId.trim());
        return textResult(taskLine(task), task);
      }
      case 'bg_cancel': {
        const id = args<{ taskId: string }>(name, raw).taskId.trim();
        const task = await client.cancel(id);
        // Cancelling an ended task changes nothing; the reply says so rather than failing.
        const line = task.status === 'cancelled' ? `Cancelled task ${id}.` : task.status === 'running' ? taskLine(task) : `Task ${id} had already ended (${task.status}); nothing was cancelled.`;
        return textResult(line, task);
      }
      case 'research_run': {
        const a = args<z.infer<(typeof TOOL_CONTRACTS)['research_run']>>(name, raw);
        if (!options.researchApiKey) {
          throw new FusionError('unauthorized', 'research_run needs a workspace API key: start fusion mcp with FUSION_RESEARCH_API_KEY set (create one with fusion keys create --workspace ID --kind workspace)');
        }
        const body = { query: a.query, sourceUrls: a.sourceUrls, ...(a.limits ? { limits: a.limits } : {}) };
        const created = await client.createRun(body, { idempotencyKey: a.idempotencyKey, apiKey: options.researchApiKey });
        watchRun(created.run);
        const lead = created.deduplicated ? 'This idempotency key already made run' : 'Created research run';
        return textResult(`${lead} ${created.run.id} (${created.run.status}). A notification follows when it ends.`, created);
      }
      case 'web_read': {
        const page = await web.read(args<{ url: string }>(name, raw).url, signal);
        return textResult(page.markdown, page, !page.read);
      }
      case 'web_crawl': {
        const crawl = await web.crawl(args<z.infer<(typeof TOOL_CONTRACTS)['web_crawl']>>(name, raw), signal);
        return textResult(crawl.markdown, crawl);
      }
      case 'web_search': {
        // Results go back to the agent only: which of them to read or research is its call.
        const found = await web.search(args<z.infer<(typeof TOOL_CONTRACTS)['web_search']>>(name, raw), signal);
        return textResult(found.markdown, found);
      }
    }
  };

  const handle = async (req: RpcRequest): Promise<void> => {
    const reply = (result: unknown): void => send({ id: req.id ?? null, result });
    const fail = (code: number, message: string): void => send({ id: req.id ?? null, error: { code, message } });
    switch (req.method) {
      case 'initialize': {
        const asked = req.params?.protocolVersion;
        const version = (MCP_PROTOCOL_VERSIONS as readonly unknown[]).includes(asked) ? (asked as string) : MCP_PROTOCOL_VERSION;
        return reply({ protocolVersion: version, capabilities: { tools: { listChanged: false }, logging: {} }, serverInfo: { name: 'fusion', version: options.version } });
      }
      case 'ping':
      case 'logging/setLevel':
        return reply({});
      case 'tools/list':
        return reply({ tools: MCP_TOOLS });
      case 'tools/call': {
        const rawName: unknown = req.params?.name;
        // Only a string names a tool: String() of a crafted object can throw.
        const name = typeof rawName === 'string' ? rawName : '';
        if (!isToolName(name)) return fail(-32602, `unknown tool ${name.slice(0, 100)}`);
        const abort = new AbortController();
        if (req.id !== undefined && req.id !== null) inflight.set(req.id, abort);
        try {
          const token = (req.params?._meta as { progressToken?: unknown } | undefined)?.progressToken;
          return reply(await callTool(name, req.params?.arguments, abort.signal, typeof token === 'string' || typeof token === 'number' ? token : undefined));
        } catch (err) {
          // Tool failures are results the agent can read, with the error code and exact message.
          const fe = toFusionError(err);
          return reply({ content: [{ type: 'text', text: `${fe.code}: ${fe.message}` }], isError: true, structuredContent: fe.toEnvelope() });
        } finally {
          if (req.id !== undefined && req.id !== null) inflight.delete(req.id);
        }
      }
      case 'notifications/cancelled': {
        const id = req.params?.requestId;
        if (typeof id === 'string' || typeof id === 'number') inflight.get(id)?.abort();
        return;
      }
      default:
        if (req.id === undefined) return; // other notifications (initialized…) need no reply
        return fail(-32601, `method ${req.method} is not supported`);
    }
  };

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
    const handled: Promise<void> = handle(req)
      .catch(() => {
        if (req.id !== undefined) send({ id: req.id ?? null, error: { code: -32603, message: 'internal error' } });
      })
      .finally(() => pending.delete(handled));
    pending.add(handled);
  }
  await Promise.allSettled(pending);
  clearInterval(heartbeat);
  session.abort();
  for (const abort of inflight.values()) abort.abort();
  await Promise.allSettled(runWatches);
  await watch;
}
