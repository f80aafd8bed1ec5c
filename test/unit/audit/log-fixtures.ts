/** Builders for hand-made tool-call logs and seals, so each test can tamper with one thing. */
import { tempDir as makeTempDir } from '../../helpers/temp-dir.js';
import { createHash } from 'node:crypto';
import {   writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SCHEMA } from '../../../src/contracts/constants.js';
import { toolCallLogFileName } from '../../../src/audit/verify-log.js';

export const SLOT = 1;
export const ATTEMPT = 1;
export const LOG_NAME = toolCallLogFileName(SLOT, ATTEMPT);
export const SEAL_NAME = `${LOG_NAME}.seal.json`;
export const DECLARED = 'https://example.com/a';

export function sha256(text: string | Uint8Array): string {
  return createHash('sha256').update(text).digest('hex');
}

export function tempDir(prefix: string): { dir: string; cleanup: () => void } {
  const made = makeTempDir(prefix);
  return { dir: made.path, cleanup: made.remove };
}

export type Line = Record<string, unknown>;

export function record(ordinal: number, overrides: Line = {}): Line {
  return {
    schema_version: SCHEMA.toolCall,
    ordinal,
    tool_name: 'read',
    arguments_sha256: sha256(`args ${String(ordinal)}`),
    arguments_bytes: 10,
    result_bytes: 100,
    result_sha256: sha256(`result ${String(ordinal)}`),
    status: 'ok',
    duration_ms: 3,
    ...overrides,
  };
}

export function okFetch(ordinal: number, overrides: Line = {}): Line {
  return record(ordinal, {
    tool_name: 'fusion_web_fetch',
    url: DECLARED,
    final_url: 'https://example.com/a/',
    http_status: 200,
    response_bytes: 1234,
    content_sha256: sha256('page'),
    ...overrides,
  });
}

export function rejectedFetch(ordinal: number, rawUrl: string, overrides: Line = {}): Line {
  return record(ordinal, { tool_name: 'fusion_web_fetch', status: 'error', rejected_url_sha256: sha256(rawUrl), ...overrides });
}

export function logText(lines: readonly Line[]): string {
  return lines.map((line) => `${JSON.stringify(line)}\n`).join('');
}

/** The seal a correct child would write for these exact log bytes. */
export function sealFor(logBytes: string | Buffer, lines: readonly Line[], overrides: Line = {}): Line {
  return {
    schema_version: SCHEMA.toolCallSeal,
    status: 'complete',
    record_count: lines.length,
    total_result_bytes: lines.reduce((sum, line) => sum + Number(line['result_bytes']), 0),
    log_sha256: sha256(logBytes),
    ...overrides,
  };
}

/** Writes the log (lines or raw bytes) and, unless `seal` is null, a seal (matching by default). */
export function writeAudit(
  dir: string,
  lines: readonly Line[],
  options: { rawLog?: string | Buffer; seal?: Line | null; sealOverrides?: Line } = {},
): void {
  const bytes = options.rawLog ?? logText(lines);
  writeFileSync(join(dir, LOG_NAME), bytes);
  if (options.seal === null) return;
  const seal = options.seal ?? sealFor(bytes, lines, options.sealOverrides);
  writeFileSync(join(dir, SEAL_NAME), `${JSON.stringify(seal)}\n`);
}
