/**
 * The sandbox entry end to end against the real broker on a real Unix socket: in-process through
 * `runChild`, and as a separately compiled tree run with plain `node` from a directory with no
 * node_modules (as in /opt/fusion), which proves the child loads nothing but builtins, the
 * sandbox files and the contracts' constants.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { CHILD_PATHS, parseChildArgs, parseChildRequest, runChild } from '../../../sandbox/child-main.js';
import { startBroker, type BrokerHandle } from '../../../src/broker/broker-server.js';
import { crossCheckBrokerRecord } from '../../../src/audit/cross-check.js';
import { verifyToolCallLog } from '../../../src/audit/verify-log.js';
import type { ChildRequest } from '../../../src/contracts/broker-protocol.js';
import { CANDIDATE_TOOLS } from '../../../src/contracts/constants.js';
import { SANDBOX_PATHS } from '../../../src/launcher/port.js';
import { silentLogger } from '../../../src/log.js';
import type { ModelProvider, ModelRequest, ModelResponse } from '../../../src/models/port.js';
import { childRequest, makeRepo, tempDir } from './fixtures.js';
import { waitFor } from '../../helpers/wait.js';

const REPO_ROOT = resolve(import.meta.dirname, '../../..');
const LOG_NAME = 'candidate-1.attempt-1.tool-calls.jsonl';

/** Greps, reads, then answers (or answers `finalText` at once). */
function scriptedProvider(finalText = 'greet lives in `src/greet.ts:1`.'): ModelProvider {
  let turn = 0;
  return {
    id: 'fake:scripted',
    engine: 'fake',
    complete(req: ModelRequest): Promise<ModelResponse> {
      turn += 1;
      const usage = { inputTokens: 3, outputTokens: 2 };
      if (req.tools.length > 0 && turn === 1) {
        return Promise.resolve({ content: '', toolCalls: [{ id: 'a', name: 'grep', arguments: '{"pattern":"greet"}' }], stopReason: 'tool_calls', usage, model: 'm' });
      }
      if (req.tools.length > 0 && turn === 2) {
        return Promise.resolve({ content: '', toolCalls: [{ id: 'a', name: 'read', arguments: '{"path":"src/greet.ts"}' }], stopReason: 'tool_calls', usage, model: 'm' });
      }
      return Promise.resolve({ content: finalText, toolCalls: [], stopReason: 'stop', usage, model: 'm' });
    },
  };
}

/** Never answers until the call is aborted. */
const hangingProvider: ModelProvider = {
  id: 'fake:hang',
  engine: 'fake',
  complete: (req) =>
    new Promise((_resolve, reject) => {
      req.signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
    }),
};

let root: string;
let cleanup: () => void;
let paths: { request: string; out: string; repo: string; broker: string };
let broker: BrokerHandle | undefined;

beforeEach(() => {
  ({ dir: root, cleanup } = tempDir('fusion-child-'));
  paths = { request: join(root, 'request.json'), out: join(root, 'out'), repo: join(root, 'repo'), broker: join(root, 'b.sock') };
  mkdirSync(paths.out);
  mkdirSync(paths.repo);
  makeRepo(paths.repo);
});
afterEach(async () => {
  await broker?.close();
  broker = undefined;
  cleanup();
  vi.restoreAllMocks();
});

async function setup(request: ChildRequest, provider: ModelProvider): Promise<string[]> {
  writeFileSync(paths.request, JSON.stringify(request));
  broker = await startBroker({ socketPath: paths.broker, provider, role: request.role, taskId: request.task_id, declaredUrls: [], log: silentLogger() });
  return ['--request', paths.request, '--out', paths.out, '--repo', paths.repo, '--broker', paths.broker];
}

function captureStderr(): string[] {
  const lines: string[] = [];
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    lines.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    return true;
  });
  return lines;
}

describe('child-main', () => {
  it('keeps its fixed paths equal to the launcher SANDBOX_PATHS', () => {
    expect(CHILD_PATHS).toEqual({ repo: SANDBOX_PATHS.repo, out: SANDBOX_PATHS.out, brokerSocket: SANDBOX_PATHS.brokerSocket, request: SANDBOX_PATHS.request });
    expect(parseChildArgs([])).toEqual({ request: SANDBOX_PATHS.request, out: SANDBOX_PATHS.out, repo: SANDBOX_PATHS.repo, broker: SANDBOX_PATHS.brokerSocket });
    expect(() => parseChildArgs(['--shell', 'x'])).toThrow('unknown argument "--shell"');
  });

  it('checks the request file shape', () => {
    expect(parseChildRequest(childRequest())).toEqual(childRequest());
    expect(() => parseChildRequest({ ...childRequest(), api_key: 'x' })).toThrow('contains unsupported key(s): api_key');
    expect(() => parseChildRequest({ ...childRequest(), slot: null })).toThrow('child request slot');
    expect(() => parseChildRequest(childRequest({}, { max_model_requests: 0 }))).toThrow('limits.max_model_requests');
  });

  it('answers, writes its files, seals a log that verifies and matches the broker record', async () => {
    const argv = await setup(childRequest(), scriptedProvider());
    const stderr = captureStderr();
    expect(await runChild(argv)).toBe(0);
    expect(stderr).toEqual([]);
    expect(readFileSync(join(paths.out, 'answer.md'), 'utf8')).toBe('greet lives in `src/greet.ts:1`.');
    expect(JSON.parse(readFileSync(join(paths.out, 'result.json'), 'utf8'))).toMatchObject({ status: 'answered', tool_calls: 2, model_requests: 3 });
    const verified = await verifyToolCallLog({ dir: paths.out, slot: 1, attempt: 1, allowedTools: CANDIDATE_TOOLS, declaredUrls: [], expectCalls: true });
    expect(verified.seal.status).toBe('complete');
    expect(crossCheckBrokerRecord(verified.records, broker?.records ?? [])).toMatchObject({ brokerModelCalls: 3, logFetches: 0 });
  });

  it('exits 3 on output_cap and still seals complete', async () => {
    const argv = await setup(childRequest({}, { output_cap_bytes: 20 }), scriptedProvider('a long answer that is over the cap'));
    const stderr = captureStderr();
    expect(await runChild(argv)).toBe(3);
    expect(JSON.parse(stderr.join('')) as unknown).toMatchObject({ error: { code: 'child_output_cap' } });
    const verified = await verifyToolCallLog({ dir: paths.out, slot: 1, attempt: 1, allowedTools: CANDIDATE_TOOLS, declaredUrls: [] });
    expect(verified.seal.status).toBe('complete');
  });

  it('exits 1 and leaves an existing log untouched (EEXIST)', async () => {
    const argv = await setup(childRequest(), scriptedProvider());
    writeFileSync(join(paths.out, LOG_NAME), 'earlier attempt\n');
    const stderr = captureStderr();
    expect(await runChild(argv)).toBe(1);
    expect(readFileSync(join(paths.out, LOG_NAME), 'utf8')).toBe('earlier attempt\n');
    expect(existsSync(join(paths.out, `${LOG_NAME}.seal.json`))).toBe(false);
    expect(existsSync(join(paths.out, 'result.json'))).toBe(false);
    expect(JSON.parse(stderr.join('')) as unknown).toMatchObject({ error: { code: 'EEXIST' } });
  });

  it('seals failed when the agent does not settle', async () => {
    const argv = await setup(childRequest({}, { max_model_requests: 1 }), scriptedProvider());
    captureStderr();
    expect(await runChild(argv)).toBe(1);
    expect(JSON.parse(readFileSync(join(paths.out, 'result.json'), 'utf8'))).toMatchObject({ status: 'failed', error: { code: 'child_limit_exceeded' } });
    await expect(verifyToolCallLog({ dir: paths.out, slot: 1, attempt: 1, allowedTools: CANDIDATE_TOOLS, declaredUrls: [] })).rejects.toThrow(
      'reports a failed audit',
    );
  });

  it('runs stage roles without a tool-call log', async () => {
    const argv = await setup(childRequest({ role: 'merger' }), scriptedProvider('merged answer'));
    captureStderr();
    expect(await runChild(argv)).toBe(0);
    expect(readFileSync(join(paths.out, 'answer.md'), 'utf8')).toBe('merged answer');
    expect(existsSync(join(paths.out, LOG_NAME))).toBe(false);
  });

  it('exits 1 on an invalid request', async () => {
    writeFileSync(paths.request, '{"schema_version":"nope"}');
    const stderr = captureStderr();
    expect(await runChild(['--request', paths.request, '--out', paths.out])).toBe(1);
    expect(stderr.join('')).toContain('"code":"invalid_input"');
  });
});

describe('child-main compiled, run with plain node outside the repository', () => {
  let build: { dir: string; cleanup: () => void };
  let entry: string;

  beforeAll(() => {
    build = tempDir('fusion-child-build-');
    // The same options as tsconfig.json; the output tree mirrors dist/ (sandbox/, src/contracts/).
    const compiled = spawnSync(
      process.execPath,
      [
        join(REPO_ROOT, 'node_modules/typescript/bin/tsc'),
        '--ignoreConfig', '--outDir', build.dir, '--rootDir', REPO_ROOT, '--module', 'nodenext', '--moduleResolution', 'nodenext',
        '--target', 'es2022', '--lib', 'es2023', '--types', 'node', '--skipLibCheck', '--verbatimModuleSyntax',
        join(REPO_ROOT, 'sandbox/child-main.ts'),
      ],
      { cwd: REPO_ROOT, encoding: 'utf8' },
    );
    // Type errors elsewhere do not block emit; a missing entry below is the real failure.
    if (compiled.status !== 0) console.warn(`tsc reported: ${compiled.stdout.slice(0, 2000)}`);
    entry = join(build.dir, 'sandbox/child-main.js');
  }, 120_000);
  afterAll(() => build.cleanup());

  function runNode(argv: string[]): { exit: Promise<number | null>; kill: (signal: NodeJS.Signals) => void; stderr: () => string } {
    const child = spawn(process.execPath, [entry, ...argv], { cwd: build.dir, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString('utf8')));
    const exit = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
    return { exit, kill: (s) => child.kill(s), stderr: () => err };
  }

  it('loads only builtins, sandbox files and the constants', async () => {
    expect(existsSync(entry)).toBe(true);
    expect(existsSync(join(build.dir, 'src/contracts/constants.js'))).toBe(true);
    const argv = await setup(childRequest(), scriptedProvider());
    const run = runNode(argv);
    expect(await run.exit).toBe(0);
    expect(run.stderr()).toBe('');
    expect(readFileSync(join(paths.out, 'answer.md'), 'utf8')).toContain('src/greet.ts:1');
    const verified = await verifyToolCallLog({ dir: paths.out, slot: 1, attempt: 1, allowedTools: CANDIDATE_TOOLS, declaredUrls: [], expectCalls: true });
    expect(verified.records).toHaveLength(2);
  });

  it('on SIGTERM cancels the loop, writes a failed outcome and a failed seal, exits 1', async () => {
    const argv = await setup(childRequest(), hangingProvider);
    const run = runNode(argv);
    // Wait until the child's model request is with the broker.
    await waitFor('the child\'s model request to reach the broker', () => (broker?.usage.requests ?? 0) > 0, 20_000, 25);
    expect(broker?.usage.requests).toBe(1);
    run.kill('SIGTERM');
    expect(await run.exit).toBe(1);
    expect(JSON.parse(readFileSync(join(paths.out, 'result.json'), 'utf8'))).toMatchObject({ status: 'failed', error: { code: 'cancelled' } });
    const seal = JSON.parse(readFileSync(join(paths.out, `${LOG_NAME}.seal.json`), 'utf8')) as Record<string, unknown>;
    expect(seal.status).toBe('failed');
    expect(run.stderr()).toContain('"code":"cancelled"');
  });
});
