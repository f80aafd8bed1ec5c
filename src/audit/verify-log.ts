/**
 * Supervisor-side verification of a candidate attempt's sealed tool-call log (docs/behaviour.md#d6).
 *
 * The child is untrusted: everything it wrote is checked from bytes up, as a sequence of small
 * named checks, each throwing `child_event_invalid` with "tool-call log invalid: <reason>".
 * The order is: files (exist, no symlink, regular, size) → log framing (newline, UTF-8) →
 * each record (JSON, closed keys, types) → ordinals → seal (framing, keys, status, counts,
 * hash, limits) → tool policy (allowlist, fetch provenance).
 */
import { constants } from 'node:fs';
import { lstat, open } from 'node:fs/promises';
import { join } from 'node:path';
import { CANDIDATE_TOOLS, CHILD_LIMITS, REJECTED_CALL_EVENT, RESEARCH_FETCH_TOOL, SCHEMA } from '../contracts/constants.js';
import {
  TOOL_CALL_FETCH_KEYS,
  TOOL_CALL_OPTIONAL_KEYS,
  TOOL_CALL_REQUIRED_KEYS,
  TOOL_CALL_SEAL_KEYS,
  type ToolCallLogRecord,
  type ToolCallSeal,
} from '../contracts/broker-record.js';
import { FusionError } from '../errors.js';
import { sha256Hex } from '../contracts/sha256.js';

export interface VerifyToolCallLogOptions {
  /** The attempt directory holding the log and its seal. */
  dir: string;
  slot: number;
  attempt: number;
  /** Tools this attempt was given (docs/behaviour.md#b10). */
  allowedTools: readonly string[];
  /** Canonical URLs from the research source policy; [] for investigate. */
  declaredUrls: readonly string[];
  /** true: at least one call is required; false: none is allowed; undefined: either. */
  expectCalls?: boolean;
}

export interface VerifiedToolCallLog {
  logPath: string;
  sealPath: string;
  records: ToolCallLogRecord[];
  seal: ToolCallSeal;
  /** sha256 of the log bytes (equal to `seal.log_sha256`). */
  logSha256: string;
  totalResultBytes: number;
}

/** A seal is one short line; anything bigger is refused unread. */
export const MAX_SEAL_BYTES = 4096;
/** 600 records with two long URLs each fit easily; refuse to read anything larger. */
export const MAX_LOG_BYTES = 16 * 1024 * 1024;

const HEX64 = /^[0-9a-f]{64}$/;
const LOG_KEYS = new Set<string>([...TOOL_CALL_REQUIRED_KEYS, ...TOOL_CALL_OPTIONAL_KEYS]);
const FETCH_PROVENANCE_KEYS = TOOL_CALL_FETCH_KEYS;

export function toolCallLogFileName(slot: number, attempt: number): string {
  return `candidate-${String(slot)}.attempt-${String(attempt)}.tool-calls.jsonl`;
}

export function toolCallSealFileName(slot: number, attempt: number): string {
  return `${toolCallLogFileName(slot, attempt)}.seal.json`;
}

/** The one error this module throws. */
export function invalidLog(reason: string, details: Record<string, unknown> = {}): FusionError {
  return new FusionError('child_event_invalid', `tool-call log invalid: ${reason}`, { details });
}

// ---------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------

/**
 * Reads an audit file without trusting the path: lstat refuses a symlink or a non-file with a
 * clear reason, then O_NOFOLLOW + fstat closes the window between the lstat and the open.
 * `what` is the noun used in reasons ("log", "audit completion seal").
 */
async function readAuditFile(path: string, what: string, maxBytes: number): Promise<Buffer> {
  let stats;
  try {
    stats = await lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw missingFile(what, path);
    throw err;
  }
  if (stats.isSymbolicLink()) throw invalidLog(`${what} is a symlink; refusing to trust a redirected audit trail`, { path });
  if (!stats.isFile()) throw invalidLog(`${what} is not a regular file`, { path });

  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw missingFile(what, path);
    if (code === 'ELOOP') throw invalidLog(`${what} is a symlink; refusing to trust a redirected audit trail`, { path });
    throw err;
  }
  try {
    const opened = await handle.stat();
    if (!opened.isFile()) throw invalidLog(`${what} is not a regular file`, { path });
    if (opened.size > maxBytes) throw invalidLog(`${what} is oversized (${String(opened.size)} > ${String(maxBytes)} bytes)`, { path });
    const bytes = await handle.readFile();
    if (bytes.length > maxBytes) throw invalidLog(`${what} is oversized (grew while read)`, { path });
    return bytes;
  } finally {
    await handle.close();
  }
}

function missingFile(what: string, path: string): FusionError {
  // A missing log is not "zero calls": the child creates it before any tool can run, so its
  // absence means the audit trail was never established and nothing the child did is known.
  if (what === 'log') return invalidLog('log is missing; the child never initialised its audit trail', { path });
  return invalidLog(`${what} is missing`, { path });
}

// ---------------------------------------------------------------------------------------------
// Log framing and records
// ---------------------------------------------------------------------------------------------

function checkEndsWithNewline(bytes: Buffer, what: string): void {
  if (bytes.length > 0 && bytes[bytes.length - 1] !== 0x0a) throw invalidLog(`${what} has trailing partial line`);
}

function decodeUtf8(bytes: Buffer, what: string): string {
  try {
    // ignoreBOM keeps a BOM in the text so it fails JSON parsing instead of vanishing.
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw invalidLog(`${what} is not valid UTF-8`);
  }
}

/**
 * Parses one line as a JSON object, and insists it is exactly what `JSON.stringify` would
 * write: that refuses duplicate keys (JSON.parse silently keeps the last one) and any encoding
 * variant that could make two different byte strings mean the same record.
 */
function parseJsonObjectLine(line: string, label: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch (err) {
    throw invalidLog(`${label} is invalid JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw invalidLog(`${label} must be a JSON object`);
  if (JSON.stringify(parsed) !== line) throw invalidLog(`${label} is not canonical JSON (duplicate keys or non-canonical encoding)`);
  return parsed as Record<string, unknown>;
}

function checkClosedKeys(record: Record<string, unknown>, label: string): void {
  const unknown = Object.keys(record).filter((key) => !LOG_KEYS.has(key));
  if (unknown.length > 0) throw invalidLog(`${label} contains unsupported key(s): ${unknown.join(', ')}`);
  const missing = TOOL_CALL_REQUIRED_KEYS.filter((key) => !Object.prototype.hasOwnProperty.call(record, key));
  if (missing.length > 0) throw invalidLog(`${label} missing required key(s): ${missing.join(', ')}`);
}

function requireCount(record: Record<string, unknown>, key: string, label: string): number {
  const value = record[key];
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw invalidLog(`${label}.${key} must be a non-negative safe integer`);
  }
  return value;
}

function requireHex(record: Record<string, unknown>, key: string, label: string): string {
  const value = record[key];
  if (typeof value !== 'string' || !HEX64.test(value)) throw invalidLog(`${label}.${key} must be a lowercase hex sha256`);
  return value;
}

function requireNonBlank(record: Record<string, unknown>, key: string, label: string): string {
  const value = record[key];
  if (typeof value !== 'string' || value.trim().length === 0) throw invalidLog(`${label}.${key} must be a non-blank string`);
  return value;
}

function parseRecord(line: string, index: number): ToolCallLogRecord {
  const label = `line ${String(index)}`;
  const raw = parseJsonObjectLine(line, label);
  checkClosedKeys(raw, label);
  if (raw['schema_version'] !== SCHEMA.toolCall) throw invalidLog(`${label}.schema_version mismatch`);
  const status = raw['status'];
  if (status !== 'ok' && status !== 'error') throw invalidLog(`${label}.status must be ok or error`);
  const record: ToolCallLogRecord = {
    schema_version: SCHEMA.toolCall,
    ordinal: requireCount(raw, 'ordinal', label),
    tool_name: requireNonBlank(raw, 'tool_name', label),
    arguments_sha256: requireHex(raw, 'arguments_sha256', label),
    arguments_bytes: requireCount(raw, 'arguments_bytes', label),
    result_bytes: requireCount(raw, 'result_bytes', label),
    result_sha256: requireHex(raw, 'result_sha256', label),
    status,
    duration_ms: requireCount(raw, 'duration_ms', label),
  };
  if (raw['url'] !== undefined) record.url = requireNonBlank(raw, 'url', label);
  if (raw['rejected_url_sha256'] !== undefined) record.rejected_url_sha256 = requireHex(raw, 'rejected_url_sha256', label);
  if (raw['final_url'] !== undefined) record.final_url = requireNonBlank(raw, 'final_url', label);
  if (raw['http_status'] !== undefined) record.http_status = requireCount(raw, 'http_status', label);
  if (raw['response_bytes'] !== undefined) record.response_bytes = requireCount(raw, 'response_bytes', label);
  if (raw['content_sha256'] !== undefined) record.content_sha256 = requireHex(raw, 'content_sha256', label);
  if (raw['timer_cut'] !== undefined) {
    if (raw['timer_cut'] !== true) throw invalidLog(`${label}.timer_cut must be true when present`);
    record.timer_cut = true;
  }
  return record;
}

function checkOrdinals(records: readonly ToolCallLogRecord[]): void {
  const seen = new Set<number>();
  records.forEach((record, index) => {
    if (seen.has(record.ordinal)) throw invalidLog(`duplicate ordinal ${String(record.ordinal)}`);
    seen.add(record.ordinal);
    if (record.ordinal !== index) {
      throw invalidLog(`ordinal gap: expected ${String(index)}, observed ${String(record.ordinal)}`);
    }
  });
}

/** Pure: parses and checks the log bytes (framing, records, ordinals). Empty = zero calls. */
export function parseToolCallLog(bytes: Buffer): ToolCallLogRecord[] {
  checkEndsWithNewline(bytes, 'log');
  const text = decodeUtf8(bytes, 'log');
  if (text.length === 0) return [];
  const lines = text.split('\n');
  lines.pop(); // the empty string after the final "\n"
  const records = lines.map((line, index) => parseRecord(line, index));
  checkOrdinals(records);
  return records;
}

// ---------------------------------------------------------------------------------------------
// Seal
// ---------------------------------------------------------------------------------------------

const SEAL = 'audit completion seal';

/** Pure: parses the seal bytes (framing, exactly 5 keys, schema, types). Status is not judged. */
export function parseToolCallSeal(bytes: Buffer): ToolCallSeal {
  if (bytes.length > MAX_SEAL_BYTES) throw invalidLog(`${SEAL} is oversized`);
  if (bytes.length === 0 || bytes[bytes.length - 1] !== 0x0a) throw invalidLog(`${SEAL} is partial`);
  const text = decodeUtf8(bytes, SEAL);
  const body = text.slice(0, -1);
  if (body.includes('\n')) throw invalidLog(`${SEAL} must be exactly one line`);
  const raw = parseJsonObjectLine(body, SEAL);
  const keys = Object.keys(raw).sort();
  const expected = [...TOOL_CALL_SEAL_KEYS].sort();
  if (keys.length !== expected.length || keys.some((key, i) => key !== expected[i])) {
    throw invalidLog(`${SEAL} keys mismatch: expected exactly ${expected.join(', ')}; found ${keys.join(', ')}`);
  }
  if (raw['schema_version'] !== SCHEMA.toolCallSeal) throw invalidLog(`${SEAL} schema mismatch`);
  const status = raw['status'];
  if (status !== 'complete' && status !== 'failed') throw invalidLog(`${SEAL} status must be complete or failed`);
  return {
    schema_version: SCHEMA.toolCallSeal,
    status,
    record_count: requireCount(raw, 'record_count', SEAL),
    total_result_bytes: requireCount(raw, 'total_result_bytes', SEAL),
    log_sha256: requireHex(raw, 'log_sha256', SEAL),
  };
}

function checkSealComplete(seal: ToolCallSeal): void {
  if (seal.status !== 'complete') throw invalidLog(`${SEAL} reports a failed audit`);
}

function checkRecordCount(seal: ToolCallSeal, records: readonly ToolCallLogRecord[]): void {
  if (seal.record_count !== records.length) {
    throw invalidLog(`${SEAL} record count mismatch (seal ${String(seal.record_count)}, log ${String(records.length)})`);
  }
}

function checkToolCallLimit(records: readonly ToolCallLogRecord[]): void {
  if (records.length > CHILD_LIMITS.maxToolCalls) throw invalidLog(`exceeds tool-call limit ${String(CHILD_LIMITS.maxToolCalls)}`);
}

function checkResultBytes(seal: ToolCallSeal, totalResultBytes: number): void {
  if (seal.total_result_bytes !== totalResultBytes) {
    throw invalidLog(`${SEAL} result-byte total mismatch (seal ${String(seal.total_result_bytes)}, log ${String(totalResultBytes)})`);
  }
}

function checkLogHash(seal: ToolCallSeal, logSha256: string): void {
  if (seal.log_sha256 !== logSha256) throw invalidLog(`${SEAL} log hash mismatch`);
}

function checkAggregateResultBytes(totalResultBytes: number): void {
  if (totalResultBytes > CHILD_LIMITS.maxToolResultBytes) {
    throw invalidLog(`exceeds aggregate result-byte limit ${String(CHILD_LIMITS.maxToolResultBytes)}`);
  }
}

/** Pure: the seal must vouch for exactly these log bytes, within the child limits. */
export function checkSealAgainstLog(seal: ToolCallSeal, records: readonly ToolCallLogRecord[], logSha256: string): number {
  const totalResultBytes = records.reduce((sum, record) => sum + record.result_bytes, 0);
  checkSealComplete(seal);
  checkRecordCount(seal, records);
  checkToolCallLimit(records);
  checkResultBytes(seal, totalResultBytes);
  checkLogHash(seal, logSha256);
  checkAggregateResultBytes(totalResultBytes);
  return totalResultBytes;
}

// ---------------------------------------------------------------------------------------------
// Policy
// ---------------------------------------------------------------------------------------------

function checkAllowlisted(record: ToolCallLogRecord, allowed: ReadonlySet<string>): void {
  // A rejected call is an event, not a tool: allowlisted because nothing ran.
  if (record.tool_name === REJECTED_CALL_EVENT) {
    if (record.status !== 'error') throw invalidLog(`rejected call record ${String(record.ordinal)} must have status error: a rejected call never runs`, { ordinal: record.ordinal });
    return;
  }
  if (!allowed.has(record.tool_name)) throw invalidLog(`non-allowlisted tool ${record.tool_name}`, { ordinal: record.ordinal });
}

/** Only fetch records may carry provenance keys: other tools have no URL to report. */
function checkNoProvenanceOnOtherTools(record: ToolCallLogRecord): void {
  const present = FETCH_PROVENANCE_KEYS.filter((key) => record[key] !== undefined);
  if (present.length > 0) {
    throw invalidLog(`record ${String(record.ordinal)} (${record.tool_name}) must not carry fetch keys: ${present.join(', ')}`);
  }
}

function checkSuccessfulFetch(record: ToolCallLogRecord, declared: ReadonlySet<string>): void {
  const label = `fetch record ${String(record.ordinal)}`;
  if (record.url === undefined) throw invalidLog(`${label} is missing url`);
  // The declared set holds canonical URLs only, so membership also proves the URL canonical.
  if (!declared.has(record.url)) throw invalidLog(`${label} URL was not declared`);
  if (record.rejected_url_sha256 !== undefined) throw invalidLog(`${label} is successful and must not carry rejected_url_sha256`);
  for (const key of ['final_url', 'http_status', 'response_bytes', 'content_sha256'] as const) {
    if (record[key] === undefined) throw invalidLog(`${label} is missing ${key}`);
  }
}

function checkRejectedFetch(record: ToolCallLogRecord): void {
  const label = `rejected fetch record ${String(record.ordinal)}`;
  if (record.url !== undefined || record.final_url !== undefined) throw invalidLog(`${label} must not persist raw URL`);
  if (record.rejected_url_sha256 === undefined) throw invalidLog(`${label} is missing rejected_url_sha256`);
  if (record.response_bytes !== undefined || record.content_sha256 !== undefined) {
    throw invalidLog(`${label} must not carry response_bytes or content_sha256`);
  }
}

function checkExpectCalls(records: readonly ToolCallLogRecord[], expectCalls: boolean | undefined): void {
  if (expectCalls === true && records.length === 0) throw invalidLog('expected at least one tool call, found none');
  if (expectCalls === false && records.length > 0) throw invalidLog(`expected no tool calls, found ${String(records.length)}`);
}

/** Pure: allowlist and fetch provenance rules for every record. */
export function checkToolPolicy(
  records: readonly ToolCallLogRecord[],
  allowedTools: readonly string[],
  declaredUrls: readonly string[],
): void {
  const allowed = new Set(allowedTools);
  const declared = new Set(declaredUrls);
  for (const record of records) {
    checkAllowlisted(record, allowed);
    // Only a repository tool that ran and answered can have been cut by its own timer.
    if (record.timer_cut !== undefined && (record.status !== 'ok' || !(CANDIDATE_TOOLS as readonly string[]).includes(record.tool_name))) {
      throw invalidLog(`record ${String(record.ordinal)} (${record.tool_name}) must not carry timer_cut`, { ordinal: record.ordinal });
    }
    if (record.tool_name !== RESEARCH_FETCH_TOOL) {
      checkNoProvenanceOnOtherTools(record);
    } else if (record.status === 'ok') {
      checkSuccessfulFetch(record, declared);
    } else {
      checkRejectedFetch(record);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Entry point
// ---------------------------------------------------------------------------------------------

/** Verifies `candidate-<slot>.attempt-<n>.tool-calls.jsonl` and its seal in `dir`. */
export async function verifyToolCallLog(options: VerifyToolCallLogOptions): Promise<VerifiedToolCallLog> {
  const logPath = join(options.dir, toolCallLogFileName(options.slot, options.attempt));
  const sealPath = `${logPath}.seal.json`;

  const logBytes = await readAuditFile(logPath, 'log', MAX_LOG_BYTES);
  const records = parseToolCallLog(logBytes);
  const logSha256 = sha256Hex(logBytes);

  const sealBytes = await readAuditFile(sealPath, SEAL, MAX_SEAL_BYTES);
  const seal = parseToolCallSeal(sealBytes);
  const totalResultBytes = checkSealAgainstLog(seal, records, logSha256);

  checkToolPolicy(records, options.allowedTools, options.declaredUrls);
  checkExpectCalls(records, options.expectCalls);
  return { logPath, sealPath, records, seal, logSha256, totalResultBytes };
}
