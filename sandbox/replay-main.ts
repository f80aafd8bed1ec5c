/**
 * Entry point of a replay sandbox: the same sandbox policy and limits as a candidate, no broker.
 *   1. read /run/fusion/request.json: { schema_version, tools, calls: [{ordinal, tool_name, arguments}] }
 *   2. replay each repository tool call over /repo (sandbox/replay-core.ts)
 *   3. write /out/replay.json: { schema_version, calls: [ReplayedCall…] } (O_EXCL, fsynced)
 * Exit 0 when the file is written, 1 otherwise (the reason on stderr).
 * Node builtins only.
 */
import { closeSync, constants, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs';
import { REPLAY_SCHEMA, replayCalls, type ReplayCall } from './replay-core.js';

const PATHS = { repo: '/repo', out: '/out/replay.json', request: '/run/fusion/request.json' } as const;
const MAX_REQUEST_BYTES = 32 * 1024 * 1024;

function fail(message: string): never {
  process.stderr.write(`fusion replay: ${message}\n`);
  process.exit(1);
}

function readRequest(): { tools: string[]; calls: ReplayCall[] } {
  const bytes = readFileSync(PATHS.request);
  if (bytes.length > MAX_REQUEST_BYTES) fail('request too large');
  const value = JSON.parse(bytes.toString('utf8')) as { schema_version?: unknown; tools?: unknown; calls?: unknown };
  if (value.schema_version !== REPLAY_SCHEMA) fail('unexpected request schema');
  if (!Array.isArray(value.tools) || !value.tools.every((t) => typeof t === 'string')) fail('tools must be a list of names');
  if (!Array.isArray(value.calls)) fail('calls must be a list');
  const calls = value.calls.map((c: unknown): ReplayCall => {
    const call = c as Partial<ReplayCall>;
    if (typeof call.ordinal !== 'number' || typeof call.tool_name !== 'string' || typeof call.arguments !== 'string') fail('malformed call');
    return { ordinal: call.ordinal, tool_name: call.tool_name, arguments: call.arguments };
  });
  return { tools: value.tools as string[], calls };
}

async function main(): Promise<void> {
  const request = readRequest();
  const calls = await replayCalls(PATHS.repo, request.calls, request.tools);
  const fd = openSync(PATHS.out, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    writeSync(fd, `${JSON.stringify({ schema_version: REPLAY_SCHEMA, calls })}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

main().catch((err: unknown) => fail(err instanceof Error ? err.message : String(err)));
