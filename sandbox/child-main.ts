/**
 * The sandbox entry: `node /opt/fusion/sandbox/child-main.js` (the compiled tree is bound at
 * /opt/fusion, so `../src/contracts/constants.js` resolves inside it). Node builtins and the
 * other sandbox files only.
 *
 *   1. read /run/fusion/request.json (the supervisor wrote it; checked here, not trusted blindly)
 *   2. candidates: create the sealed tool-call log in /out at once (EEXIST → exit 1, untouched),
 *      so a missing log can never be mistaken for "zero tool calls"
 *   3. run the agent loop against the broker socket
 *   4. seal the log: `complete` only when the agent settled, `failed` otherwise (also on throw)
 *
 * Exit codes: 0 answered, 3 output_cap, 1 any failure. Errors go to stderr as one JSON line
 * `{"error":{"code","message"}}`. Paths can be overridden for tests:
 * `--request F --out D --repo D --broker S`.
 */
import { readFileSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ChatMessage, ChildRequest } from '../src/contracts/broker-protocol.js';
import { SCHEMA, WORKFLOWS } from '../src/contracts/constants.js';
import { agentSettled, runAgentLoop } from './agent-loop.js';
import { openToolCallLog, type ToolCallLog } from './audit-log.js';
import { createBrokerClient } from './broker-client.js';
import type { ErrorCode } from '../src/common/error-codes.js';

/**
 * The fixed sandbox paths (src/launcher/port.ts SANDBOX_PATHS; duplicated because the child may
 * load nothing from src/ but the contracts' constants; a test keeps the two equal).
 */
export const CHILD_PATHS = {
  repo: '/repo',
  out: '/out',
  brokerSocket: '/run/fusion/broker.sock',
  request: '/run/fusion/request.json',
} as const;

export const EXIT_CODES = { answered: 0, failed: 1, outputCap: 3 } as const;

/** The request file is small; anything bigger is refused unread. */
const MAX_REQUEST_BYTES = 16 * 1024 * 1024;

export interface ChildPaths {
  request: string;
  out: string;
  repo: string;
  broker: string;
}

class ChildError extends Error {
  override readonly name = 'ChildError';
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
  }
}

const FLAGS: Record<string, keyof ChildPaths> = { '--request': 'request', '--out': 'out', '--repo': 'repo', '--broker': 'broker' };

export function parseChildArgs(argv: readonly string[]): ChildPaths {
  const paths: ChildPaths = { request: CHILD_PATHS.request, out: CHILD_PATHS.out, repo: CHILD_PATHS.repo, broker: CHILD_PATHS.brokerSocket };
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i] ?? '';
    const key = FLAGS[flag];
    const value = argv[i + 1];
    if (key === undefined) throw new ChildError('invalid_input', `unknown argument ${JSON.stringify(flag.slice(0, 100))}`);
    if (value === undefined || value === '') throw new ChildError('invalid_input', `${flag} needs a value`);
    paths[key] = value;
  }
  return paths;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isStringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === 'string');
}

function isCount(value: unknown, min: number): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= min;
}

const MESSAGE_ROLES = new Set(['system', 'user', 'assistant', 'tool']);
const STAGE_ROLES = new Set(['candidate', 'evaluator', 'repair', 'merger']);
const REQUEST_KEYS = [
  'schema_version', 'task_id', 'workflow', 'role', 'slot', 'attempt', 'tools', 'declared_urls', 'messages', 'limits', 'compression_prompt',
];
const LIMIT_KEYS = ['max_model_requests', 'max_tool_calls', 'max_tool_result_bytes', 'output_cap_bytes'] as const;

function isMessage(value: unknown): value is ChatMessage {
  return isRecord(value) && typeof value.role === 'string' && MESSAGE_ROLES.has(value.role) && typeof value.content === 'string';
}

/** Checks the request file's shape (closed at the top level); throws `invalid_input` naming the field. */
export function parseChildRequest(value: unknown): ChildRequest {
  const bad = (field: string, why: string): never => {
    throw new ChildError('invalid_input', `child request ${field} ${why}`);
  };
  if (!isRecord(value)) return bad('', 'must be an object');
  const unknown = Object.keys(value).filter((key) => !REQUEST_KEYS.includes(key));
  if (unknown.length > 0) bad('', `contains unsupported key(s): ${unknown.sort().join(', ')}`);
  if (value.schema_version !== SCHEMA.childRequest) bad('schema_version', `must be ${SCHEMA.childRequest}`);
  if (typeof value.task_id !== 'string' || value.task_id === '') bad('task_id', 'must be a non-empty string');
  if (!(WORKFLOWS as readonly unknown[]).includes(value.workflow)) bad('workflow', `must be one of: ${WORKFLOWS.join(', ')}`);
  if (typeof value.role !== 'string' || !STAGE_ROLES.has(value.role)) bad('role', 'must be candidate, evaluator, repair or merger');
  if (value.role === 'candidate' ? !isCount(value.slot, 1) : value.slot !== null) {
    bad('slot', 'must be a positive integer for a candidate and null otherwise');
  }
  if (!isCount(value.attempt, 1)) bad('attempt', 'must be a positive integer');
  if (!isStringArray(value.tools)) bad('tools', 'must be an array of strings');
  if (!isStringArray(value.declared_urls)) bad('declared_urls', 'must be an array of strings');
  if (!Array.isArray(value.messages) || value.messages.length === 0 || !value.messages.every(isMessage)) {
    bad('messages', 'must be a non-empty array of chat messages');
  }
  const limits = value.limits;
  if (!isRecord(limits)) return bad('limits', 'must be an object');
  for (const key of LIMIT_KEYS) if (!isCount(limits[key], 1)) bad(`limits.${key}`, 'must be a positive integer');
  if (typeof value.compression_prompt !== 'string') bad('compression_prompt', 'must be a string');
  return value as unknown as ChildRequest;
}

function readRequest(path: string): ChildRequest {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw new ChildError('invalid_input', `child request could not be read: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (bytes.length > MAX_REQUEST_BYTES) throw new ChildError('invalid_input', `child request exceeds ${String(MAX_REQUEST_BYTES)} bytes`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new ChildError('invalid_input', 'child request is not valid JSON');
  }
  return parseChildRequest(parsed);
}

function reportError(err: unknown, fallbackCode: ErrorCode = 'child_failed'): void {
  const code = isRecord(err) && typeof err.code === 'string' ? err.code : fallbackCode;
  const message = err instanceof Error ? err.message : isRecord(err) && typeof err.message === 'string' ? err.message : String(err);
  process.stderr.write(`${JSON.stringify({ error: { code, message } })}\n`);
}

/** Runs one child to completion; resolves with the process exit code. Never rejects. */
export async function runChild(argv: readonly string[]): Promise<number> {
  let paths: ChildPaths;
  let request: ChildRequest;
  let log: ToolCallLog | undefined;
  try {
    paths = parseChildArgs(argv);
    request = readRequest(paths.request);
    if (request.role === 'candidate') {
      // slot is checked by parseChildRequest; EEXIST leaves the existing file untouched.
      log = openToolCallLog({ dir: paths.out, slot: request.slot ?? 0, attempt: request.attempt });
    }
  } catch (err) {
    reportError(err);
    return EXIT_CODES.failed;
  }

  const controller = new AbortController();
  // The launcher stops a child with SIGTERM and a short grace: cancel the loop so the outcome
  // and a `failed` seal are still written.
  const onTerminate = (): void => controller.abort();
  process.once('SIGTERM', onTerminate);
  let settled = false;
  let exitCode: number = EXIT_CODES.failed;
  try {
    const outcome = await runAgentLoop({
      request,
      broker: createBrokerClient({ socketPath: paths.broker }),
      repoRoot: paths.repo,
      outDir: paths.out,
      signal: controller.signal,
      ...(log === undefined ? {} : { toolLog: log }),
    });
    settled = agentSettled(outcome);
    if (outcome.status === 'answered') exitCode = EXIT_CODES.answered;
    else if (outcome.status === 'output_cap') exitCode = EXIT_CODES.outputCap;
    if (outcome.error !== undefined) reportError(outcome.error);
  } catch (err) {
    reportError(err);
    exitCode = EXIT_CODES.failed;
  } finally {
    process.removeListener('SIGTERM', onTerminate);
    if (log !== undefined) {
      try {
        const seal = log.seal(settled);
        if (seal.status === 'failed' && exitCode !== EXIT_CODES.failed) {
          reportError({ code: 'child_event_invalid', message: `tool-call log sealed as failed: ${log.brokenReason ?? 'unknown reason'}` });
          exitCode = EXIT_CODES.failed;
        }
      } catch (err) {
        reportError(err, 'child_event_invalid');
        exitCode = EXIT_CODES.failed;
      }
    }
  }
  return exitCode;
}

/** True when this file is the process entry (not imported by a test). */
function invokedAsEntry(): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (invokedAsEntry()) {
  void runChild(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
