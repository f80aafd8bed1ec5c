/**
 * A Model Context Protocol server over stdio (JSON-RPC 2.0, one message per line) for local
 * coding agents. It forwards to the daemon's socket API and turns each submitted task's
 * terminal event into a `notifications/message`, so the agent waits for a notification instead
 * of polling (SPEC §F2).
 */
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { toFusionError } from '../errors.js';
import type { FusionClient } from '../cli/client.js';
import { MCP_TOOLS } from './tool-schemas.js';

export const MCP_PROTOCOL_VERSION = '2025-06-18';

interface RpcRequest {
  jsonrpc: '2.0';
  id?: number | string | null;
  method: string;
  params?: Record<string, unknown>;
}

interface BgResultReply {
  status: string;
  answer: { present: boolean; header?: string; text?: string; path?: string };
  error?: { code: string; message: string } | null;
}

export interface McpServerOptions {
  client: FusionClient;
  repo: string;
  version: string;
  input: Readable;
  output: Writable;
}

export async function serveMcp(options: McpServerOptions): Promise<void> {
  const { client, repo, output } = options;
  const send = (message: Record<string, unknown>): void => void output.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
  const submitted = new Set<string>();
  // A fast task can finish before its receipt reply is processed: keep recent terminals briefly.
  const recentTerminals = new Map<string, unknown>();
  const announce = (data: unknown): void => send({ method: 'notifications/message', params: { level: 'info', logger: 'fusion', data } });
  const watcher = new AbortController();

  // One event stream for the whole session; only tasks this session submitted are announced.
  const watch = client
    .stream(
      '/v1/events',
      (event) => {
        if (event.kind !== 'terminal') return;
        const taskId = String(event.taskId);
        if (submitted.has(taskId)) return announce(event.data);
        recentTerminals.set(taskId, event.data);
        if (recentTerminals.size > 256) recentTerminals.delete(recentTerminals.keys().next().value as string);
      },
      watcher.signal,
    )
    .catch(() => undefined);

  const callTool = async (name: string, args: unknown): Promise<Record<string, unknown>> => {
    if (name === 'fusion_investigate' || name === 'fusion_research') {
      const workflow = name === 'fusion_investigate' ? 'investigate' : 'research';
      const receipt = (await client.call('POST', `/v1/tasks/${workflow}`, { arguments: args, repo })) as { taskId: string; text: string };
      submitted.add(receipt.taskId);
      const early = recentTerminals.get(receipt.taskId);
      if (early !== undefined) setImmediate(() => announce(early));
      return { content: [{ type: 'text', text: receipt.text }], structuredContent: receipt };
    }
    if (name === 'bg_result') {
      const a = (args ?? {}) as { taskId?: unknown; delivery?: unknown };
      const id = typeof a.taskId === 'string' ? a.taskId.trim() : '';
      const delivery = typeof a.delivery === 'string' ? a.delivery : 'auto';
      const result = (await client.call('GET', `/v1/tasks/${encodeURIComponent(id)}/result?delivery=${encodeURIComponent(delivery)}`)) as BgResultReply;
      const answer = result.answer;
      const text = answer.present
        ? `${answer.header}\n\n${answer.text ?? `The answer is stored at ${answer.path} (delivery: artifact).`}`
        : result.status === 'running'
          ? `Task ${id} is still running. Wait for the terminal notification. Do not poll.`
          : `Task ${id} ${result.status}: no answer was committed.${result.error ? ` ${result.error.code}: ${result.error.message}` : ''}`;
      return { content: [{ type: 'text', text }], structuredContent: result, isError: !answer.present && result.status !== 'running' };
    }
    throw Object.assign(new Error(`unknown tool ${name}`), { rpcCode: -32602 });
  };

  const handle = async (req: RpcRequest): Promise<void> => {
    const reply = (result: unknown): void => send({ id: req.id ?? null, result });
    const fail = (code: number, message: string): void => send({ id: req.id ?? null, error: { code, message } });
    switch (req.method) {
      case 'initialize':
        return reply({ protocolVersion: MCP_PROTOCOL_VERSION, capabilities: { tools: { listChanged: false }, logging: {} }, serverInfo: { name: 'fusion', version: options.version } });
      case 'ping':
        return reply({});
      case 'tools/list':
        return reply({ tools: MCP_TOOLS });
      case 'tools/call': {
        const name = String(req.params?.name ?? '');
        try {
          return reply(await callTool(name, req.params?.arguments));
        } catch (err) {
          if ((err as { rpcCode?: number }).rpcCode) return fail(-32602, (err as Error).message);
          // Tool failures are results the agent can read, with the error code and exact message.
          const fe = toFusionError(err);
          return reply({ content: [{ type: 'text', text: `${fe.code}: ${fe.message}` }], isError: true, structuredContent: fe.toEnvelope() });
        }
      }
      default:
        if (req.id === undefined) return; // notifications (initialized, cancelled…) need no reply
        return fail(-32601, `method ${req.method} is not supported`);
    }
  };

  const lines = createInterface({ input: options.input, crlfDelay: Infinity });
  const pending: Array<Promise<void>> = [];
  for await (const line of lines) {
    if (line.trim() === '') continue;
    let req: RpcRequest;
    try {
      req = JSON.parse(line) as RpcRequest;
    } catch {
      send({ id: null, error: { code: -32700, message: 'parse error: each line must be one JSON-RPC message' } });
      continue;
    }
    pending.push(handle(req));
  }
  await Promise.allSettled(pending);
  watcher.abort();
  await watch;
}
