/**
 * Test fixtures for the agent loop and the broker: a scripted fake broker that speaks the real
 * wire protocol on a real Unix socket, a temp repository, and request builders.
 */
import { tempDir as makeTempDir } from '../../helpers/temp-dir.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { dirname, join } from 'node:path';
import type {
  ChildRequest,
  FetchRequest,
  FetchResponse,
  ModelTurnRequest,
  ModelTurnResponse,
  ToolCall,
} from '../../../src/contracts/broker-protocol.js';
import { CANDIDATE_TOOLS, CHILD_LIMITS, OUTPUT_CAPS, SCHEMA } from '../../../src/contracts/constants.js';

export interface TempDir {
  dir: string;
  cleanup: () => void;
}

export function tempDir(prefix: string): TempDir {
  const made = makeTempDir(prefix);
  return { dir: made.path, cleanup: made.remove };
}

/** A small repository with a few files to search and read. */
export function makeRepo(root: string): void {
  const files: Record<string, string> = {
    'README.md': '# Demo\n\nA demo repository.\n',
    'src/app.ts': 'export function start() {\n  return greet("world");\n}\n',
    'src/greet.ts': 'export function greet(name: string) {\n  return `hello ${name}`;\n}\n',
  };
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
}

let callCounter = 0;
export function call(name: string, args: unknown): ToolCall {
  callCounter += 1;
  return { id: `call_${String(callCounter)}`, name, arguments: typeof args === 'string' ? args : JSON.stringify(args) };
}

export function toolTurn(...calls: ToolCall[]): ModelTurnResponse {
  return { message: { role: 'assistant', content: '', tool_calls: calls }, stop_reason: 'tool_calls', usage: { input_tokens: 10, output_tokens: 5 } };
}

export function answerTurn(content: string): ModelTurnResponse {
  return { message: { role: 'assistant', content, tool_calls: [] }, stop_reason: 'stop', usage: { input_tokens: 10, output_tokens: 5 } };
}

export type ScriptedModel = (req: ModelTurnRequest, index: number) => ModelTurnResponse | { status: number; error: { code: string; message: string } };
export type ScriptedFetch = (req: FetchRequest, index: number) => FetchResponse;

export interface FakeBroker {
  socketPath: string;
  modelRequests: ModelTurnRequest[];
  fetchRequests: FetchRequest[];
  close(): Promise<void>;
}

/** A fake broker on a real Unix socket: scripted model turns and fetches, requests recorded. */
export async function startFakeBroker(socketPath: string, model: ScriptedModel, fetch?: ScriptedFetch): Promise<FakeBroker> {
  const modelRequests: ModelTurnRequest[] = [];
  const fetchRequests: FetchRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
      let status = 200;
      let out: unknown;
      if (req.url === '/v1/model') {
        const turn = body as ModelTurnRequest;
        modelRequests.push(turn);
        const answer = model(turn, modelRequests.length - 1);
        if ('error' in answer) {
          status = answer.status;
          out = { error: { ...answer.error, details: {} } };
        } else {
          out = answer;
        }
      } else if (req.url === '/v1/fetch' && fetch !== undefined) {
        const fr = body as FetchRequest;
        fetchRequests.push(fr);
        out = fetch(fr, fetchRequests.length - 1);
      } else {
        status = 404;
        out = { error: { code: 'not_found', message: 'no route', details: {} } };
      }
      const bytes = Buffer.from(JSON.stringify(out));
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(bytes.length) });
      res.end(bytes);
    });
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    socketPath,
    modelRequests,
    fetchRequests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export const DECLARED_URL = 'https://example.com/docs';

export function childRequest(overrides: Partial<ChildRequest> = {}, limits: Partial<ChildRequest['limits']> = {}): ChildRequest {
  const role = overrides.role ?? 'candidate';
  return {
    schema_version: SCHEMA.childRequest,
    task_id: 'investigate-0123456789abcdef0123456789abcdef',
    workflow: 'investigate',
    role,
    slot: role === 'candidate' ? 1 : null,
    attempt: 1,
    tools: role === 'candidate' ? [...CANDIDATE_TOOLS] : [],
    declared_urls: [],
    messages: [
      { role: 'system', content: 'You are a test agent.' },
      { role: 'user', content: 'Where is greet defined?' },
    ],
    compression_prompt: 'Your answer is too long. Rewrite it shorter.',
    ...overrides,
    limits: {
      max_model_requests: CHILD_LIMITS.maxModelRequests,
      max_tool_calls: CHILD_LIMITS.maxToolCalls,
      max_tool_result_bytes: CHILD_LIMITS.maxToolResultBytes,
      output_cap_bytes: role === 'candidate' ? OUTPUT_CAPS.candidateBytes : OUTPUT_CAPS.evaluatorBytes,
      ...limits,
    },
  };
}
