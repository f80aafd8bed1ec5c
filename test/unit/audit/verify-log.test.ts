import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CANDIDATE_TOOLS, CHILD_LIMITS, REJECTED_CALL_EVENT, SCHEMA } from '../../../src/contracts/constants.js';
import { MAX_SEAL_BYTES, verifyToolCallLog, type VerifyToolCallLogOptions } from '../../../src/audit/verify-log.js';
import { FusionError } from '../../../src/errors.js';
import {
  ATTEMPT,
  DECLARED,
  LOG_NAME,
  SEAL_NAME,
  SLOT,
  logText,
  okFetch,
  record,
  rejectedFetch,
  sealFor,
  sha256,
  tempDir,
  writeAudit,
  type Line,
} from './log-fixtures.js';

const RESEARCH_TOOLS = [...CANDIDATE_TOOLS, 'fusion_web_fetch'];

let dir: string;
let cleanup: () => void;

beforeEach(() => {
  ({ dir, cleanup } = tempDir('fusion-verify-log-'));
});
afterEach(() => cleanup());

function verify(overrides: Partial<VerifyToolCallLogOptions> = {}) {
  return verifyToolCallLog({
    dir,
    slot: SLOT,
    attempt: ATTEMPT,
    allowedTools: RESEARCH_TOOLS,
    declaredUrls: [DECLARED],
    ...overrides,
  });
}

/** Asserts the verifier fails with child_event_invalid and a reason matching `reason`. */
async function expectInvalid(reason: RegExp | string, overrides: Partial<VerifyToolCallLogOptions> = {}): Promise<void> {
  const error = await verify(overrides).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(FusionError);
  const fusion = error as FusionError;
  expect(fusion.code).toBe('child_event_invalid');
  expect(fusion.message.startsWith('tool-call log invalid: ')).toBe(true);
  if (typeof reason === 'string') expect(fusion.message).toContain(reason);
  else expect(fusion.message).toMatch(reason);
}

const valid: Line[] = [record(0), record(1, { tool_name: 'grep' }), okFetch(2), rejectedFetch(3, 'http://10.0.0.1/')];

describe('verifyToolCallLog: valid logs', () => {
  it('accepts a correct log and returns records and seal', async () => {
    writeAudit(dir, valid);
    const verified = await verify();
    expect(verified.records).toHaveLength(4);
    expect(verified.records[2]).toMatchObject({ url: DECLARED, http_status: 200 });
    expect(verified.seal).toMatchObject({ status: 'complete', record_count: 4, total_result_bytes: 400 });
    expect(verified.logSha256).toBe(sha256(readFileSync(join(dir, LOG_NAME))));
    expect(verified.totalResultBytes).toBe(400);
  });

  it('accepts an empty log as zero calls when sealed', async () => {
    writeAudit(dir, []);
    const verified = await verify();
    expect(verified.records).toEqual([]);
  });

  it('honours expectCalls', async () => {
    writeAudit(dir, []);
    await expectInvalid('expected at least one tool call', { expectCalls: true });
    writeAudit(dir, [record(0)]);
    await expectInvalid('expected no tool calls, found 1', { expectCalls: false });
  });
});

describe('verifyToolCallLog: files', () => {
  it('a missing log is not zero calls', async () => {
    await expectInvalid('log is missing');
  });

  it('refuses a symlinked log', async () => {
    const real = join(dir, 'elsewhere.jsonl');
    writeFileSync(real, logText(valid));
    symlinkSync(real, join(dir, LOG_NAME));
    writeFileSync(join(dir, SEAL_NAME), `${JSON.stringify(sealFor(logText(valid), valid))}\n`);
    await expectInvalid('log is a symlink');
  });

  it('refuses a log that is a directory', async () => {
    mkdirSync(join(dir, LOG_NAME));
    await expectInvalid('log is not a regular file');
  });

  it('refuses a symlinked seal', async () => {
    writeAudit(dir, valid, { seal: null });
    const real = join(dir, 'seal-elsewhere.json');
    writeFileSync(real, `${JSON.stringify(sealFor(logText(valid), valid))}\n`);
    symlinkSync(real, join(dir, SEAL_NAME));
    await expectInvalid('audit completion seal is a symlink');
  });
});

describe('verifyToolCallLog: log framing and records', () => {
  it('trailing partial line', async () => {
    writeAudit(dir, valid, { rawLog: logText(valid).slice(0, -1) });
    await expectInvalid('trailing partial line');
  });

  it('invalid UTF-8', async () => {
    const bytes = Buffer.concat([Buffer.from(logText([record(0)])), Buffer.from([0xff, 0xfe, 0x0a])]);
    writeAudit(dir, [record(0)], { rawLog: bytes });
    await expectInvalid('not valid UTF-8');
  });

  it('invalid JSON line', async () => {
    writeAudit(dir, [record(0)], { rawLog: `${logText([record(0)])}{not json\n` });
    await expectInvalid('line 1 is invalid JSON');
  });

  it('blank line', async () => {
    writeAudit(dir, [record(0)], { rawLog: `${logText([record(0)])}\n` });
    await expectInvalid('line 1 is invalid JSON');
  });

  it('duplicate JSON keys or re-encoded lines are refused', async () => {
    const line = JSON.stringify(record(0));
    writeAudit(dir, [record(0)], { rawLog: `${line.slice(0, -1)},"ordinal":0}\n` });
    await expectInvalid('not canonical JSON');
    writeAudit(dir, [record(0)], { rawLog: `${JSON.stringify(record(0), null, 1).replace(/\n/g, '')}\n` });
    await expectInvalid('not canonical JSON');
  });

  it('extra key', async () => {
    writeAudit(dir, [record(0, { arguments: '{"path":"secret"}' })]);
    await expectInvalid('line 0 contains unsupported key(s): arguments');
  });

  it('missing key', async () => {
    const line = record(0);
    delete line['duration_ms'];
    writeAudit(dir, [line]);
    await expectInvalid('line 0 missing required key(s): duration_ms');
  });

  it('wrong schema_version', async () => {
    writeAudit(dir, [record(0, { schema_version: 'pi-background-tasks.fusion-tool-call.v1' })]);
    await expectInvalid('line 0.schema_version mismatch');
  });

  it('bad hex (uppercase, prefixed, short)', async () => {
    for (const bad of [sha256('x').toUpperCase(), `sha256:${sha256('x')}`, 'abc']) {
      writeAudit(dir, [record(0, { result_sha256: bad })]);
      await expectInvalid('line 0.result_sha256 must be a lowercase hex sha256');
    }
  });

  it('negative, fractional, unsafe or string integers', async () => {
    for (const bad of [-1, 1.5, 2 ** 53, '7']) {
      writeAudit(dir, [record(0, { arguments_bytes: bad })]);
      await expectInvalid('line 0.arguments_bytes must be a non-negative safe integer');
    }
  });

  it('invalid status', async () => {
    writeAudit(dir, [record(0, { status: 'timeout' })]);
    await expectInvalid('line 0.status must be ok or error');
  });

  it('ordinal gap', async () => {
    writeAudit(dir, [record(0), record(2)]);
    await expectInvalid('ordinal gap: expected 1, observed 2');
  });

  it('log starting at 1 is a gap', async () => {
    writeAudit(dir, [record(1)]);
    await expectInvalid('ordinal gap: expected 0, observed 1');
  });

  it('duplicate ordinal', async () => {
    writeAudit(dir, [record(0), record(0)]);
    await expectInvalid('duplicate ordinal 0');
  });

  it('a dropped middle line shows as a gap', async () => {
    const text = logText(valid);
    writeAudit(dir, valid);
    const lines = text.split('\n');
    lines.splice(1, 1);
    writeFileSync(join(dir, LOG_NAME), lines.join('\n'));
    await expectInvalid('ordinal gap: expected 1, observed 2');
  });
});

describe('verifyToolCallLog: seal', () => {
  it('audit completion seal is missing', async () => {
    writeAudit(dir, valid, { seal: null });
    await expectInvalid('audit completion seal is missing');
  });

  it('reports a failed audit', async () => {
    writeAudit(dir, valid, { sealOverrides: { status: 'failed' } });
    await expectInvalid('audit completion seal reports a failed audit');
  });

  it('6-key seal', async () => {
    writeAudit(dir, valid, { seal: { ...sealFor(logText(valid), valid), signed_by: 'child' } });
    await expectInvalid('audit completion seal keys mismatch');
  });

  it('4-key seal', async () => {
    const seal = sealFor(logText(valid), valid);
    delete seal['total_result_bytes'];
    writeAudit(dir, valid, { seal });
    await expectInvalid('audit completion seal keys mismatch');
  });

  it('oversized seal', async () => {
    writeAudit(dir, valid, { seal: null });
    writeFileSync(join(dir, SEAL_NAME), `${' '.repeat(MAX_SEAL_BYTES)}${JSON.stringify(sealFor(logText(valid), valid))}\n`);
    await expectInvalid('audit completion seal is oversized');
  });

  it('partial seal', async () => {
    writeAudit(dir, valid, { seal: null });
    writeFileSync(join(dir, SEAL_NAME), JSON.stringify(sealFor(logText(valid), valid)));
    await expectInvalid('audit completion seal is partial');
  });

  it('seal with two lines', async () => {
    writeAudit(dir, valid, { seal: null });
    const line = JSON.stringify(sealFor(logText(valid), valid));
    writeFileSync(join(dir, SEAL_NAME), `${line}\n${line}\n`);
    await expectInvalid('audit completion seal must be exactly one line');
  });

  it('seal schema mismatch', async () => {
    writeAudit(dir, valid, { sealOverrides: { schema_version: SCHEMA.toolCall } });
    await expectInvalid('audit completion seal schema mismatch');
  });

  it('record count mismatch when the last line is dropped', async () => {
    writeAudit(dir, valid);
    const text = logText(valid);
    writeFileSync(join(dir, LOG_NAME), text.slice(0, text.lastIndexOf('\n', text.length - 2) + 1));
    await expectInvalid('record count mismatch');
  });

  it('result-byte total mismatch', async () => {
    writeAudit(dir, valid, { sealOverrides: { total_result_bytes: 399 } });
    await expectInvalid('result-byte total mismatch');
  });

  it('log hash mismatch when one byte is edited', async () => {
    writeAudit(dir, valid);
    const path = join(dir, LOG_NAME);
    const bytes = readFileSync(path);
    const target = bytes.indexOf(Buffer.from(`"result_sha256":"`)) + `"result_sha256":"`.length;
    bytes[target] = bytes[target] === 0x61 ? 0x62 : 0x61; // stays lowercase hex
    writeFileSync(path, bytes);
    await expectInvalid('log hash mismatch');
  });

  it('log hash mismatch when the seal names another log', async () => {
    writeAudit(dir, valid, { sealOverrides: { log_sha256: sha256('other') } });
    await expectInvalid('log hash mismatch');
  });

  it('exceeds tool-call limit 600', async () => {
    const lines = Array.from({ length: CHILD_LIMITS.maxToolCalls + 1 }, (_unused, i) => record(i, { result_bytes: 1 }));
    writeAudit(dir, lines);
    await expectInvalid('exceeds tool-call limit 600');
  });

  it('exactly 600 calls is allowed', async () => {
    const lines = Array.from({ length: CHILD_LIMITS.maxToolCalls }, (_unused, i) => record(i, { result_bytes: 1 }));
    writeAudit(dir, lines);
    expect((await verify()).records).toHaveLength(600);
  });

  it('exceeds aggregate result-byte limit', async () => {
    const half = CHILD_LIMITS.maxToolResultBytes / 2;
    writeAudit(dir, [record(0, { result_bytes: half }), record(1, { result_bytes: half + 1 })]);
    await expectInvalid(`exceeds aggregate result-byte limit ${String(CHILD_LIMITS.maxToolResultBytes)}`);
  });
});

describe('verifyToolCallLog: policy', () => {
  it('non-allowlisted tool bash', async () => {
    writeAudit(dir, [record(0), record(1, { tool_name: 'bash' })]);
    await expectInvalid('non-allowlisted tool bash');
  });

  it('a rejected call is an allowlisted event, but only as an error: a rejected call never runs', async () => {
    writeAudit(dir, [record(0), record(1, { tool_name: REJECTED_CALL_EVENT, status: 'error' })]);
    await expect(verify()).resolves.toMatchObject({ records: [{ tool_name: 'read' }, { tool_name: REJECTED_CALL_EVENT }] });
    writeAudit(dir, [record(0, { tool_name: REJECTED_CALL_EVENT, status: 'ok' })]);
    await expectInvalid('rejected call record 0 must have status error: a rejected call never runs');
  });

  it('fetch is not allowlisted for investigate', async () => {
    writeAudit(dir, [okFetch(0)]);
    await expectInvalid('non-allowlisted tool fusion_web_fetch', { allowedTools: [...CANDIDATE_TOOLS], declaredUrls: [] });
  });

  it('URL was not declared', async () => {
    writeAudit(dir, [okFetch(0, { url: 'https://evil.example/' })]);
    await expectInvalid('URL was not declared');
  });

  it('a non-canonical spelling of a declared URL is not declared', async () => {
    writeAudit(dir, [okFetch(0, { url: 'HTTPS://Example.COM/a#frag' })]);
    await expectInvalid('URL was not declared');
  });

  it('ok fetch must carry all provenance', async () => {
    for (const key of ['final_url', 'http_status', 'response_bytes', 'content_sha256']) {
      const line = okFetch(0);
      delete line[key];
      writeAudit(dir, [line]);
      await expectInvalid(`fetch record 0 is missing ${key}`);
    }
    const noUrl = okFetch(0);
    delete noUrl['url'];
    writeAudit(dir, [noUrl]);
    await expectInvalid('fetch record 0 is missing url');
  });

  it('ok fetch must not carry rejected_url_sha256', async () => {
    writeAudit(dir, [okFetch(0, { rejected_url_sha256: sha256('x') })]);
    await expectInvalid('must not carry rejected_url_sha256');
  });

  it('error fetch with url must not persist raw URL', async () => {
    writeAudit(dir, [rejectedFetch(0, 'http://10.0.0.1/', { url: 'http://10.0.0.1/' })]);
    await expectInvalid('must not persist raw URL');
    writeAudit(dir, [rejectedFetch(0, 'http://10.0.0.1/', { final_url: 'http://10.0.0.1/' })]);
    await expectInvalid('must not persist raw URL');
  });

  it('error fetch must carry rejected_url_sha256', async () => {
    writeAudit(dir, [record(0, { tool_name: 'fusion_web_fetch', status: 'error' })]);
    await expectInvalid('rejected fetch record 0 is missing rejected_url_sha256');
  });

  it('error fetch may carry an http_status', async () => {
    writeAudit(dir, [rejectedFetch(0, DECLARED, { http_status: 404 })]);
    expect((await verify()).records[0]).toMatchObject({ status: 'error', http_status: 404 });
  });

  it('other tools must not carry fetch keys', async () => {
    writeAudit(dir, [record(0, { url: DECLARED })]);
    await expectInvalid('record 0 (read) must not carry fetch keys: url');
  });
});
