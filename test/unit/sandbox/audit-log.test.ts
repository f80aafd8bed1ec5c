import { existsSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  TOOL_CALL_LIMIT_MESSAGE,
  openToolCallLog,
  toolCallLogFileName,
  type ToolCallLog,
} from '../../../sandbox/audit-log.js';
import { verifyToolCallLog } from '../../../src/audit/verify-log.js';
import { CANDIDATE_TOOLS, CHILD_LIMITS, SCHEMA } from '../../../src/contracts/constants.js';
import { DECLARED, sha256, tempDir } from '../audit/log-fixtures.js';

const TOOLS = [...CANDIDATE_TOOLS, 'fusion_web_fetch'];

let dir: string;
let cleanup: () => void;

beforeEach(() => {
  ({ dir, cleanup } = tempDir('fusion-audit-log-'));
});
afterEach(() => cleanup());

function fakeClock(): () => number {
  let t = 1000;
  return () => {
    t += 7;
    return t;
  };
}

function open(): ToolCallLog {
  return openToolCallLog({ dir, slot: 2, attempt: 1, nowMs: fakeClock() });
}

function lines(log: ToolCallLog): Record<string, unknown>[] {
  return readFileSync(log.path, 'utf8')
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

function run(log: ToolCallLog, id: string, tool: string, args: string, result: string): void {
  const begun = log.begin(id, tool);
  expect(begun.ok).toBe(true);
  expect(log.finish(id, { arguments: args, result, status: 'ok' }).ok).toBe(true);
}

function verify(slot = 2) {
  return verifyToolCallLog({ dir, slot, attempt: 1, allowedTools: TOOLS, declaredUrls: [DECLARED] });
}

describe('openToolCallLog', () => {
  it('creates the log 0600 at child start, empty', () => {
    const log = open();
    expect(log.path).toBe(join(dir, 'candidate-2.attempt-1.tool-calls.jsonl'));
    expect(toolCallLogFileName(2, 1)).toBe('candidate-2.attempt-1.tool-calls.jsonl');
    expect(statSync(log.path).mode & 0o777).toBe(0o600);
    expect(statSync(log.path).size).toBe(0);
    expect(log.sealPath).toBe(`${log.path}.seal.json`);
  });

  it('EEXIST leaves an existing file untouched', () => {
    const path = join(dir, toolCallLogFileName(2, 1));
    writeFileSync(path, 'previous attempt\n');
    let error: unknown;
    try {
      open();
    } catch (err) {
      error = err;
    }
    expect((error as NodeJS.ErrnoException).code).toBe('EEXIST');
    expect(readFileSync(path, 'utf8')).toBe('previous attempt\n');
    expect(existsSync(`${path}.seal.json`)).toBe(false);
  });

  it('EEXIST for a planted symlink, whose target is untouched', () => {
    const target = join(dir, 'target');
    writeFileSync(target, 'keep');
    symlinkSync(target, join(dir, toolCallLogFileName(2, 1)));
    expect(() => open()).toThrow(expect.objectContaining({ code: 'EEXIST' }));
    expect(readFileSync(target, 'utf8')).toBe('keep');
  });

  it('rejects a bad slot or attempt', () => {
    expect(() => openToolCallLog({ dir, slot: 0, attempt: 1 })).toThrow(TypeError);
    expect(() => openToolCallLog({ dir, slot: 1, attempt: 1.5 })).toThrow(TypeError);
  });
});

describe('writer round trip', () => {
  it('writes one line per call with exactly the SPEC keys, verified by the supervisor', async () => {
    const log = open();
    run(log, 'c1', 'read', '{"path":"SECRET_PATH.ts"}', 'SECRET_FILE_CONTENT');
    run(log, 'c2', 'grep', '{"pattern":"x"}', '');
    expect(log.begin('c3', 'fusion_web_fetch')).toEqual({ ok: true, ordinal: 2 });
    expect(
      log.finish('c3', {
        arguments: Buffer.from(`{"url":"${DECLARED}"}`),
        result: Buffer.from('PAGE_TEXT'),
        status: 'ok',
        fetch: {
          outcome: 'fetched',
          url: DECLARED,
          finalUrl: `${DECLARED}/`,
          httpStatus: 200,
          responseBytes: 4,
          contentSha256: sha256('body'),
        },
      }),
    ).toEqual({ ok: true, ordinal: 2 });
    log.begin('c4', 'fusion_web_fetch');
    log.finish('c4', {
      arguments: '{"url":"http://RAW-UNDECLARED.example/"}',
      result: 'fusion_web_fetch url was not declared',
      status: 'error',
      fetch: { outcome: 'rejected', attemptedUrl: 'http://RAW-UNDECLARED.example/' },
    });
    const seal = log.seal(true);

    expect(seal).toMatchObject({ schema_version: SCHEMA.toolCallSeal, status: 'complete', record_count: 4 });
    const text = readFileSync(log.path, 'utf8');
    for (const secret of ['SECRET_PATH', 'SECRET_FILE_CONTENT', 'PAGE_TEXT', 'RAW-UNDECLARED']) expect(text).not.toContain(secret);

    const written = lines(log);
    expect(Object.keys(written[0] ?? {})).toEqual([
      'schema_version',
      'ordinal',
      'tool_name',
      'arguments_sha256',
      'arguments_bytes',
      'result_bytes',
      'result_sha256',
      'status',
      'duration_ms',
    ]);
    expect(written[0]).toEqual({
      schema_version: SCHEMA.toolCall,
      ordinal: 0,
      tool_name: 'read',
      arguments_sha256: sha256('{"path":"SECRET_PATH.ts"}'),
      arguments_bytes: 25,
      result_bytes: 19,
      result_sha256: sha256('SECRET_FILE_CONTENT'),
      status: 'ok',
      duration_ms: 7,
    });
    expect(written[2]).toMatchObject({
      url: DECLARED,
      final_url: `${DECLARED}/`,
      http_status: 200,
      response_bytes: 4,
      content_sha256: sha256('body'),
    });
    expect(written[3]).toMatchObject({ status: 'error', rejected_url_sha256: sha256('http://RAW-UNDECLARED.example/') });
    expect(written[3]).not.toHaveProperty('url');

    const sealText = readFileSync(log.sealPath, 'utf8');
    expect(sealText.endsWith('\n')).toBe(true);
    expect(sealText.split('\n')).toHaveLength(2);
    expect(JSON.parse(sealText)).toEqual(seal);
    expect(seal.log_sha256).toBe(sha256(readFileSync(log.path)));
    expect(seal.total_result_bytes).toBe(19 + 0 + 9 + 37);
    expect(statSync(log.sealPath).mode & 0o777).toBe(0o600);

    const verified = await verify();
    expect(verified.records.map((r) => r.ordinal)).toEqual([0, 1, 2, 3]);
  });

  it('zero calls: empty log, complete seal', async () => {
    const log = open();
    expect(log.seal(true)).toMatchObject({ status: 'complete', record_count: 0, log_sha256: sha256('') });
    expect((await verify()).records).toEqual([]);
  });

  it('writes in ordinal order when calls finish out of order', async () => {
    const log = open();
    expect(log.begin('a', 'read')).toEqual({ ok: true, ordinal: 0 });
    expect(log.begin('b', 'grep')).toEqual({ ok: true, ordinal: 1 });
    expect(log.finish('b', { arguments: '{}', result: 'b', status: 'ok' })).toEqual({ ok: true, ordinal: 1 });
    expect(lines(log)).toEqual([]); // held until ordinal 0 is written
    expect(log.finish('a', { arguments: '{}', result: 'a', status: 'error' })).toEqual({ ok: true, ordinal: 0 });
    expect(lines(log).map((l) => [l['ordinal'], l['tool_name']])).toEqual([
      [0, 'read'],
      [1, 'grep'],
    ]);
    expect(log.seal(true).status).toBe('complete');
    await verify();
  });

  it('logs a repository call cut by a wall-clock limit as timer_cut, and the verifier accepts it', async () => {
    const log = open();
    expect(log.begin('a', 'grep').ok).toBe(true);
    expect(log.finish('a', { arguments: '{}', result: 'cut', status: 'ok', timerCut: true }).ok).toBe(true);
    expect(log.begin('b', 'grep').ok).toBe(true);
    expect(log.finish('b', { arguments: '{}', result: 'whole', status: 'ok' }).ok).toBe(true);
    expect(lines(log).map((l) => l['timer_cut'])).toEqual([true, undefined]);
    log.seal(true);
    expect((await verify()).records.map((r) => r.timer_cut)).toEqual([true, undefined]);
  });

  it('seal twice is refused', () => {
    const log = open();
    log.seal(true);
    expect(() => log.seal(true)).toThrow(/already sealed/);
  });
});

describe('writer guards fail the seal', () => {
  it('refuses call 601 with the exact message', async () => {
    const log = open();
    for (let i = 0; i < CHILD_LIMITS.maxToolCalls; i += 1) run(log, `c${String(i)}`, 'ls', '{}', 'x');
    const refused = log.begin('c600', 'ls');
    expect(refused).toEqual({ ok: false, message: 'fusion child reached tool call 601, exceeding the 600-call execution limit' });
    expect(TOOL_CALL_LIMIT_MESSAGE).toBe('fusion child reached tool call 601, exceeding the 600-call execution limit');
    expect(log.recordCount).toBe(600);
    expect(log.seal(true)).toMatchObject({ status: 'failed', record_count: 600 });
    await expect(verify()).rejects.toThrow(/reports a failed audit/);
  });

  it('duplicate start of the same call', async () => {
    const log = open();
    expect(log.begin('a', 'read').ok).toBe(true);
    const dup = log.begin('a', 'read');
    expect(dup.ok).toBe(false);
    expect(log.brokenReason).toMatch(/duplicate start/);
    expect(log.seal(true).status).toBe('failed');
    await expect(verify()).rejects.toThrow(/tool-call log invalid: audit completion seal reports a failed audit/);
  });

  it('finish without a start', () => {
    const log = open();
    expect(log.finish('ghost', { arguments: '{}', result: '', status: 'ok' }).ok).toBe(false);
    expect(log.brokenReason).toMatch(/without a matching start/);
    expect(log.seal(true).status).toBe('failed');
  });

  it('a call started but never finished', () => {
    const log = open();
    log.begin('a', 'read');
    expect(log.seal(true).status).toBe('failed');
  });

  it('an agent that never settled', () => {
    const log = open();
    run(log, 'a', 'read', '{}', 'x');
    expect(log.seal(false)).toMatchObject({ status: 'failed', record_count: 1 });
  });

  it('aggregate tool results over 32 MiB', () => {
    const log = open();
    run(log, 'a', 'read', '{}', 'x');
    log.begin('b', 'read');
    const big = new Uint8Array(CHILD_LIMITS.maxToolResultBytes);
    const result = log.finish('b', { arguments: '{}', result: big, status: 'ok' });
    expect(result.ok).toBe(false);
    expect(log.brokenReason).toMatch(/aggregate/);
    expect(log.recordCount).toBe(1);
    expect(log.seal(true)).toMatchObject({ status: 'failed', record_count: 1, total_result_bytes: 1 });
  });

  it('exactly 32 MiB in total is allowed', () => {
    const log = open();
    log.begin('a', 'read');
    expect(log.finish('a', { arguments: '{}', result: new Uint8Array(CHILD_LIMITS.maxToolResultBytes), status: 'ok' }).ok).toBe(true);
    expect(log.seal(true).status).toBe('complete');
  });

  it('fetch provenance inconsistent with the tool or status', () => {
    const cases: Array<(log: ToolCallLog) => void> = [
      (log) => {
        log.begin('a', 'fusion_web_fetch');
        log.finish('a', { arguments: '{}', result: '', status: 'ok' });
      },
      (log) => {
        log.begin('a', 'read');
        log.finish('a', { arguments: '{}', result: '', status: 'error', fetch: { outcome: 'rejected', attemptedUrl: 'x' } });
      },
      (log) => {
        log.begin('a', 'fusion_web_fetch');
        log.finish('a', { arguments: '{}', result: '', status: 'error', fetch: { outcome: 'fetched', url: DECLARED, finalUrl: DECLARED, httpStatus: 200, responseBytes: 1, contentSha256: sha256('') } });
      },
      (log) => {
        log.begin('a', 'fusion_web_fetch');
        log.finish('a', { arguments: '{}', result: '', status: 'ok', fetch: { outcome: 'fetched', url: DECLARED, finalUrl: DECLARED, httpStatus: 200, responseBytes: 1, contentSha256: 'ABC' } });
      },
    ];
    cases.forEach((act, i) => {
      const log = openToolCallLog({ dir, slot: 3, attempt: i + 1 });
      act(log);
      expect(log.brokenReason).toBeDefined();
      expect(log.recordCount).toBe(0);
      expect(log.seal(true).status).toBe('failed');
    });
  });

  it('nothing is appended once the log is broken', () => {
    const log = open();
    log.finish('ghost', { arguments: '{}', result: '', status: 'ok' });
    expect(log.begin('a', 'read').ok).toBe(false);
    expect(log.recordCount).toBe(0);
  });
});
