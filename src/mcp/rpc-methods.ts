/**
 * The JSON-RPC methods the server answers: `initialize` (the newest protocol version unless the
 * client asks for another it knows), `ping`, `logging/setLevel`, `tools/list`, `tools/call` (a
 * tool failure is a result the agent can read, with the error code and exact message), and the
 * `notifications/cancelled` that aborts a call in flight. Other notifications need no reply;
 * another method is refused.
 */
import { toFusionError } from '../errors.js';
import type { Send } from './session-output.js';
import type { ToolHandler } from './tool-call.js';
import { MCP_TOOLS, isToolName, type ToolName } from './tool-schemas.js';

/** Newest first; an initialize asking for another version gets the newest. */
export const MCP_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'] as const;
export const MCP_PROTOCOL_VERSION = MCP_PROTOCOL_VERSIONS[0];

export interface RpcRequest {
  jsonrpc: '2.0';
  id?: number | string | null;
  method: string;
  params?: Record<string, unknown>;
}

export interface RpcMethods {
  /** Answers one request (or takes one notification). */
  handle(req: RpcRequest): Promise<void>;
  /** Aborts every tool call still in flight (the session is ending). */
  abortInflight(): void;
}

export function rpcMethods(options: { send: Send; version: string; tools: Record<ToolName, ToolHandler> }): RpcMethods {
  const { send, tools } = options;
  const inflight = new Map<string | number, AbortController>();
  return {
    async handle(req) {
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
            return reply(await tools[name](req.params?.arguments, { signal: abort.signal, progressToken: typeof token === 'string' || typeof token === 'number' ? token : undefined }));
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
    },
    abortInflight() {
      for (const abort of inflight.values()) abort.abort();
    },
  };
}
