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
 */
import type { Readable, Writable } from 'node:stream';
import type { z } from 'zod';
import { FusionError, toFusionError } from '../errors.js';
import type { FusionClient } from '../client/index.js';
import type { BgResult, ResearchRunView, TaskView } from '../client/types.js';
import { parseWith } from '../api/http-util.js';
import { readableHere } from '../common/readable.js';
import { realpathSync } from 'node:fs';
import { isAbsolute, relative, resolve as resolvePath } from 'node:path';
import { UNTRUSTED_CAUTION } from '../contracts/research-limits.js';
import type { ResearchGetInput, ResearchListInput, ResearchSnapshotsInput } from '../contracts/agent-tools.js';
import { codeSpan, fenced, urlLink } from '../research/crawl/research-document.js';
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
  /** The repository of a task tool called without `repo`. */
  repo: string;
  /** Directories (real paths) a task tool's `repo` may lie in; the default repo is always allowed. */
  roots?: readonly string[];
  /**
   * The egress seams `fusion mcp` was started with (--resolve/--allow-cidr). research_run checks
   * that the daemon crawling the run has them too, rather than quietly crawling without them.
   */
  egressSeams?: { resolve: readonly string[]; allowCidrs: readonly string[] };
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

/** A run's status as words ("is succeeded" reads wrong). */
const RUN_STATUS_WORDS: Readonly<Record<string, string>> = { queued: 'is queued', running: 'is running', succeeded: 'has succeeded', failed: 'has failed', canceled: 'was canceled' };

function runLine(run: ResearchRunView): string {
  const err = run.error ? ` — ${run.error}` : '';
  const doc = run.resultDocumentId ? ` Document ${run.resultDocumentId}.` : '';
  return `Research run ${run.id} ${RUN_STATUS_WORDS[run.status] ?? `is ${run.status}`}${err}.${doc}`;
}

/** Seams `fusion mcp` has that the daemon's health does not list (all of them when the daemon does not say). */
function seamsMissing(seams: { resolve: readonly string[]; allowCidrs: readonly string[] }, health: Record<string, unknown>): string[] {
  const egress = health.egress as { resolve?: unknown; allowCidrs?: unknown } | undefined;
  const has = (list: unknown, item: string): boolean => Array.isArray(list) && list.some((x) => typeof x === 'string' && x.trim() === item.trim());
  return [
    ...seams.resolve.filter((r) => !has(egress?.resolve, r)).map((r) => `--resolve ${r}`),
    ...seams.allowCidrs.filter((c) => !has(egress?.allowCidrs, c)).map((c) => `--allow-cidr ${c}`),
  ];
}

/** Snapshots as Markdown: the caution, one line of provenance each, and the text (fenced) when asked for. */
function snapshotsMarkdown(runId: string, snapshots: ReadonlyArray<{ canonicalUrl: string; httpStatus: number | null; contentType: string | null; bytes: number | null; sha256: string | null; content?: string | null }>, withContent: boolean): string {
  const parts = [UNTRUSTED_CAUTION, `# Snapshots of research run ${codeSpan(runId)} (${String(snapshots.length)})`];
  if (snapshots.length === 0) parts.push('_The run stored no page._');
  for (const s of snapshots) {
    parts.push(`- ${urlLink(s.canonicalUrl)}: HTTP ${String(s.httpStatus ?? 'none')}, ${codeSpan(s.contentType ?? 'unknown type')}, ${String(s.bytes ?? 'unknown')} bytes, sha256 ${codeSpan(s.sha256 ?? 'none')}`);
    if (withContent) parts.push(s.content === null || s.content === undefined ? '_No text was kept for this page._' : fenced(s.content.startsWith(`${UNTRUSTED_CAUTION}\n\n`) ? s.content.slice(UNTRUSTED_CAUTION.length + 2) : s.content));
  }
  return `${parts.join('\n\n')}\n`;
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

  const roots = [...(options.roots ?? [])];
  /** The repository a task tool names (within the roots), and its arguments without `repo` for the daemon's contract. */
  const taskRepo = (name: ToolName, raw: unknown): { repo: string; rest: unknown } => {
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw) || !Object.hasOwn(raw, 'repo')) return { repo, rest: raw };
    const { repo: asked, ...rest } = raw as Record<string, unknown>;
    if (typeof asked !== 'string' || !isAbsolute(asked)) {
      throw new FusionError('invalid_input', `${name}.repo must be an absolute path to a repository inside the server's roots`, { details: { tool: name, field: 'repo' } });
    }
    let real: string;
    try {
      real = realpathSync(asked);
    } catch (err) {
      throw new FusionError('invalid_input', `${name}.repo ${asked.slice(0, 300)} is not a readable directory (${(err as NodeJS.ErrnoException).code ?? 'error'})`, { details: { tool: name, field: 'repo' } });
    }
    const inside = (root: string): boolean => {
      const rel = relative(root, real);
      return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
    };
    if (real !== resolvePath(repo) && !roots.some(inside)) {
      const offered = roots.length > 0 ? `the roots ${roots.join(', ')}` : `only its repository ${repo}`;
      throw new FusionError('invalid_input', `${name}.repo ${asked.slice(0, 300)} is outside what this MCP server was started with (${offered}); start fusion mcp with --root for that directory`, {
        details: { tool: name, field: 'repo', roots: roots.length > 0 ? roots : [repo] },
      });
    }
    return { repo: real, rest };
  };

  const researchKey = (): string => {
    if (!options.researchApiKey) {
      throw new FusionError('unauthorized', 'the research tools need a workspace API key: start fusion mcp with FUSION_RESEARCH_API_KEY set (create one with fusion keys create --workspace ID --kind workspace)');
    }
    return options.researchApiKey;
  };

  /**
   * research_run's crawl and fusion_research's source fetches happen in the daemon: this server's
   * seams must be the daemon's too, or the call is refused up front (without them every source
   * would end as a dns_failure in a task that still "succeeds").
   */
  const checkDaemonSeams = async (tool: 'research_run' | 'fusion_research'): Promise<void> => {
    const seams = options.egressSeams;
    if (seams === undefined || (seams.resolve.length === 0 && seams.allowCidrs.length === 0)) return;
    // A daemon this session started was given the same seams.
    if ((await client.connect()).embedded) return;
    const missing = seamsMissing(seams, (await client.health()) as unknown as Record<string, unknown>);
    if (missing.length === 0) return;
    throw new FusionError(
      'invalid_config',
      `${tool}: fusion mcp was started with ${missing.join(', ')}, but ${tool === 'research_run' ? 'research runs are crawled' : "fusion_research's sources are fetched"} by the daemon at ${client.describe()}, which ${((await client.health()) as unknown as Record<string, unknown>).egress === undefined ? 'does not show its egress settings to this user' : 'does not have them'}: start that daemon with the same flags, or run fusion mcp with no daemon running (it then starts its own with them). web_read, web_crawl and web_search use fusion mcp's seams.`,
      { details: { missing } },
    );
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
        // The daemon validates the arguments (the contract's exact messages); `repo` is this server's.
        const target = taskRepo(name, raw);
        if (name === 'fusion_research') await checkDaemonSeams(name);
        const receipt = await client.submit(name === 'fusion_investigate' ? 'investigate' : 'research', target.rest, { repo: target.repo });
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
        const apiKey = researchKey();
        await checkDaemonSeams(name);
        const body = { query: a.query, sourceUrls: a.sourceUrls, ...(a.limits ? { limits: a.limits } : {}) };
        const created = await client.createRun(body, { idempotencyKey: a.idempotencyKey, apiKey });
        const lead = created.deduplicated ? 'This idempotency key already made run' : 'Created research run';
        if (TERMINAL_RUN.has(created.run.status)) {
          // Direct dispatch ends the run inside the create: say how it ended; no notification follows.
          const next = created.run.status === 'succeeded' ? ' Read its document with research_get and its pages with research_snapshots.' : '';
          return textResult(`${lead} ${created.run.id}; it has already ended. ${runLine(created.run)}${next}`, created);
        }
        watchRun(created.run);
        return textResult(`${lead} ${created.run.id} (${created.run.status}). A notification follows when it ends.`, created);
      }
      case 'research_get': {
        const a = args<ResearchGetInput>(name, raw);
        const apiKey = researchKey();
        const run = await client.getRun(a.runId.trim(), { apiKey });
        const document = a.document !== false && run.status === 'succeeded' ? await client.document(run.id, { apiKey }) : null;
        const skipped = (run.crawl?.skipped ?? []) as Array<{ url: string; reason: string }>;
        const why = document === null && skipped.length > 0 ? `\n\nNot read (${String(skipped.length)}):\n${skipped.map((s) => `- ${codeSpan(s.url)}: ${codeSpan(s.reason)}`).join('\n')}` : '';
        return textResult(document === null ? `${runLine(run)}${why}` : `${runLine(run)}\n\n${document.content}`, { run, document });
      }
      case 'research_snapshots': {
        const a = args<ResearchSnapshotsInput>(name, raw);
        const id = a.runId.trim();
        const snapshots = await client.snapshots(id, { apiKey: researchKey() });
        const shown = a.content === true ? snapshots : snapshots.map(({ content: _content, ...meta }) => meta);
        return textResult(snapshotsMarkdown(id, shown, a.content === true), { runId: id, snapshots: shown });
      }
      case 'research_list': {
        const a = args<ResearchListInput>(name, raw);
        const page = await client.listRuns({ apiKey: researchKey(), ...(a.limit === undefined ? {} : { limit: a.limit }), ...(a.cursor === undefined ? {} : { cursor: a.cursor }) });
        const lines = page.runs.map((r) => `- ${runLine(r)}`);
        const more = page.nextCursor === null ? '' : `\n\nMore runs: call research_list with cursor ${JSON.stringify(page.nextCursor)}.`;
        return textResult(`${page.runs.length === 0 ? 'No research runs in this workspace.' : lines.join('\n')}${more}`, page);
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
