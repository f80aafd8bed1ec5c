/**
 * The child's sealed tool-call log (docs/behaviour.md#d1–docs/behaviour.md#d5). Runs INSIDE the sandbox: node builtins and
 * `src/contracts/constants.ts` only.
 *
 * Every call is synchronous on purpose: a line is on disk (fsynced) before the agent sees the
 * tool result, and nothing is left in a buffer if the child is killed.
 *
 * Ordering: ordinals are assigned at `begin`. Records are written strictly in ordinal order: a
 * call that finishes while an earlier one is still running is held (as its computed record,
 * never raw data) and written as soon as every earlier call has finished. A call that never
 * finishes therefore blocks every later line, and `seal` reports `failed`.
 *
 * Anything that makes the log untrustworthy (a duplicate or unmatched start, a finish for an
 * unknown call, the 601st call, the aggregate result-byte limit, inconsistent fetch provenance,
 * a write error) marks the log broken: nothing more is appended and the seal says `failed`.
 */
import { createHash } from 'node:crypto';
import { closeSync, constants, fchmodSync, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { CHILD_LIMITS, RESEARCH_FETCH_TOOL, SCHEMA } from '../src/contracts/constants.js';
import type { ToolCallLogRecord, ToolCallSeal, ToolCallStatus } from '../src/contracts/broker-record.js';
import { sha256Hex } from '../src/contracts/sha256.js';
import { fsyncDir } from '../src/common/durable-fs.js';

export interface ToolCallLogOptions {
  /** The attempt's output directory (`/out` in the sandbox). Must already exist. */
  dir: string;
  slot: number;
  attempt: number;
  /** Monotonic milliseconds; tests inject a fake clock. */
  nowMs?: () => number;
}

/** Provenance of a `fusion_web_fetch` call (docs/behaviour.md#d3). */
export type FetchProvenance =
  | {
      outcome: 'fetched';
      /** The declared canonical URL that was requested. */
      url: string;
      finalUrl: string;
      httpStatus: number;
      /** Raw response body bytes. */
      responseBytes: number;
      /** sha256 (lowercase hex) of the raw response body. */
      contentSha256: string;
    }
  | {
      outcome: 'rejected';
      /** The raw URL the model asked for (only its sha256 is written); '' if there was none. */
      attemptedUrl: string;
      httpStatus?: number;
    };

export interface ToolCallOutcome {
  /** The tool-call arguments as sent by the model: JSON text or raw bytes. Only hashed. */
  arguments: string | Uint8Array;
  /** The result text or bytes handed back to the model. Only hashed. */
  result: string | Uint8Array;
  status: ToolCallStatus;
  /** Required for `fusion_web_fetch`, forbidden for every other tool. */
  fetch?: FetchProvenance;
  /** A repository tool's result was cut by a wall-clock limit (logged as `timer_cut: true`). */
  timerCut?: true;
}

export type BeginResult = { ok: true; ordinal: number } | { ok: false; message: string };
export type FinishResult = { ok: true; ordinal: number } | { ok: false; message: string };

export interface ToolCallLog {
  readonly path: string;
  readonly sealPath: string;
  /** Assigns the next ordinal, or refuses (the caller must stop the agent on refusal). */
  begin(callId: string, toolName: string): BeginResult;
  /** Records a finished call; a refusal means the log is broken and the agent must stop. */
  finish(callId: string, outcome: ToolCallOutcome): FinishResult;
  /** Writes `<log>.seal.json` once and closes the log. `settled`: the agent loop ended normally. */
  seal(settled: boolean): ToolCallSeal;
  /** Why the log is broken (the seal will be `failed`), or undefined. */
  readonly brokenReason: string | undefined;
  readonly recordCount: number;
  readonly totalResultBytes: number;
}

export const TOOL_CALL_LIMIT_MESSAGE = `fusion child reached tool call ${String(CHILD_LIMITS.maxToolCalls + 1)}, exceeding the ${String(CHILD_LIMITS.maxToolCalls)}-call execution limit`;

export function toolCallLogFileName(slot: number, attempt: number): string {
  return `candidate-${String(slot)}.attempt-${String(attempt)}.tool-calls.jsonl`;
}

export function toolCallSealPath(logPath: string): string {
  return `${logPath}.seal.json`;
}

const HEX64 = /^[0-9a-f]{64}$/;
const FILE_MODE = 0o600;

function toBytes(value: string | Uint8Array): Uint8Array {
  return typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
}

function isCount(value: number): boolean {
  return Number.isSafeInteger(value) && value >= 0;
}

/** Writes all of `bytes` (writeSync may write less than asked) and fsyncs. */
function writeAllSync(fd: number, bytes: Uint8Array): void {
  let offset = 0;
  while (offset < bytes.length) {
    offset += writeSync(fd, bytes, offset, bytes.length - offset);
  }
  fsyncSync(fd);
}

/**
 * Creates the log exclusively. `O_EXCL` refuses an existing file (or a planted symlink) with
 * `EEXIST`, leaving it untouched; `O_NOFOLLOW` guards the path itself against symlinks.
 */
function createExclusive(path: string): number {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  try {
    return openSync(path, flags, FILE_MODE);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') {
      throw Object.assign(new Error(`tool-call log already exists, refusing to reuse it: ${path}`), {
        code: 'EEXIST',
        cause: err,
      });
    }
    throw err;
  }
}

function checkPositiveInteger(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 1) throw new TypeError(`${name} must be a positive integer`);
}

interface Pending {
  ordinal: number;
  toolName: string;
  startedMs: number;
}

/** Opens (creates) the attempt's tool-call log. Throws with `code: 'EEXIST'` if it exists. */
export function openToolCallLog(options: ToolCallLogOptions): ToolCallLog {
  checkPositiveInteger('slot', options.slot);
  checkPositiveInteger('attempt', options.attempt);
  const nowMs = options.nowMs ?? (() => performance.now());
  const path = join(options.dir, toolCallLogFileName(options.slot, options.attempt));
  const sealPath = toolCallSealPath(path);

  let fd: number | undefined = createExclusive(path);
  try {
    // Mode is masked by the umask at creation; make 0600 explicit.
    fchmodSync(fd, FILE_MODE);
    fsyncSync(fd);
    fsyncDir(options.dir);
  } catch (err) {
    closeSync(fd);
    throw err;
  }

  let nextOrdinal = 0;
  let nextToWrite = 0;
  let recordCount = 0;
  let totalResultBytes = 0;
  let broken: string | undefined;
  let sealed = false;
  const running = new Map<string, Pending>();
  const seenCallIds = new Set<string>();
  /** Finished records waiting for an earlier ordinal to finish. */
  const held = new Map<number, ToolCallLogRecord>();
  const logHash = createHash('sha256');

  function markBroken(reason: string): { ok: false; message: string } {
    broken ??= reason;
    return { ok: false, message: `tool-call log broken: ${broken}` };
  }

  function appendLine(record: ToolCallLogRecord): void {
    if (fd === undefined) throw new Error('tool-call log is closed');
    const bytes = Buffer.from(`${JSON.stringify(record)}\n`, 'utf8');
    writeAllSync(fd, bytes);
    logHash.update(bytes);
    recordCount += 1;
    totalResultBytes += record.result_bytes;
  }

  /** Writes every held record whose predecessors are all on disk. */
  function flushInOrder(): void {
    for (let record = held.get(nextToWrite); record !== undefined; record = held.get(nextToWrite)) {
      held.delete(nextToWrite);
      appendLine(record);
      nextToWrite += 1;
    }
  }

  function provenanceKeys(toolName: string, outcome: ToolCallOutcome): Partial<ToolCallLogRecord> | string {
    const isFetch = toolName === RESEARCH_FETCH_TOOL;
    const fetch = outcome.fetch;
    if (!isFetch) {
      if (fetch !== undefined) return `tool ${toolName} must not carry fetch provenance`;
      return outcome.timerCut === true && outcome.status === 'ok' ? { timer_cut: true } : {};
    }
    if (fetch === undefined) return `${toolName} call finished without fetch provenance`;
    if (fetch.outcome === 'fetched') {
      if (outcome.status !== 'ok') return `${toolName} fetched provenance requires status ok`;
      if (fetch.url.length === 0 || fetch.finalUrl.length === 0) return `${toolName} provenance URLs must be non-empty`;
      if (!isCount(fetch.httpStatus) || !isCount(fetch.responseBytes)) return `${toolName} provenance counts are invalid`;
      if (!HEX64.test(fetch.contentSha256)) return `${toolName} content_sha256 must be lowercase hex sha256`;
      return {
        url: fetch.url,
        final_url: fetch.finalUrl,
        http_status: fetch.httpStatus,
        response_bytes: fetch.responseBytes,
        content_sha256: fetch.contentSha256,
      };
    }
    if (outcome.status !== 'error') return `${toolName} rejected provenance requires status error`;
    const keys: Partial<ToolCallLogRecord> = {
      rejected_url_sha256: sha256Hex(Buffer.from(fetch.attemptedUrl, 'utf8')),
    };
    if (fetch.httpStatus !== undefined) {
      if (!isCount(fetch.httpStatus)) return `${toolName} provenance counts are invalid`;
      keys.http_status = fetch.httpStatus;
    }
    return keys;
  }

  return {
    path,
    sealPath,
    get brokenReason() {
      return broken;
    },
    get recordCount() {
      return recordCount;
    },
    get totalResultBytes() {
      return totalResultBytes;
    },

    begin(callId: string, toolName: string): BeginResult {
      if (sealed) return markBroken(`tool call ${callId} started after the log was sealed`);
      if (broken !== undefined) return markBroken(broken);
      if (seenCallIds.has(callId)) return markBroken(`duplicate start of tool call ${callId}`);
      if (nextOrdinal >= CHILD_LIMITS.maxToolCalls) {
        // The agent must stop here; the attempt cannot complete, so the seal says failed.
        broken ??= TOOL_CALL_LIMIT_MESSAGE;
        return { ok: false, message: TOOL_CALL_LIMIT_MESSAGE };
      }
      seenCallIds.add(callId);
      const ordinal = nextOrdinal;
      nextOrdinal += 1;
      running.set(callId, { ordinal, toolName, startedMs: nowMs() });
      return { ok: true, ordinal };
    },

    finish(callId: string, outcome: ToolCallOutcome): FinishResult {
      if (sealed) return markBroken(`tool call ${callId} finished after the log was sealed`);
      const pending = running.get(callId);
      if (pending === undefined) return markBroken(`finish of tool call ${callId} without a matching start`);
      running.delete(callId);
      if (broken !== undefined) return markBroken(broken);

      const argumentBytes = toBytes(outcome.arguments);
      const resultBytes = toBytes(outcome.result);
      if (outcome.status !== 'ok' && outcome.status !== 'error') return markBroken(`tool call ${callId} has an invalid status`);
      const extra = provenanceKeys(pending.toolName, outcome);
      if (typeof extra === 'string') return markBroken(extra);
      const pendingResultBytes = [...held.values()].reduce((sum, r) => sum + r.result_bytes, 0);
      if (totalResultBytes + pendingResultBytes + resultBytes.length > CHILD_LIMITS.maxToolResultBytes) {
        return markBroken(`tool results exceed the aggregate ${String(CHILD_LIMITS.maxToolResultBytes)}-byte limit`);
      }

      const record: ToolCallLogRecord = {
        schema_version: SCHEMA.toolCall,
        ordinal: pending.ordinal,
        tool_name: pending.toolName,
        arguments_sha256: sha256Hex(argumentBytes),
        arguments_bytes: argumentBytes.length,
        result_bytes: resultBytes.length,
        result_sha256: sha256Hex(resultBytes),
        status: outcome.status,
        duration_ms: Math.max(0, Math.round(nowMs() - pending.startedMs)),
        ...extra,
      };
      held.set(record.ordinal, record);
      try {
        flushInOrder();
      } catch (err) {
        return markBroken(`write failed: ${err instanceof Error ? err.message : String(err)}`);
      }
      return { ok: true, ordinal: record.ordinal };
    },

    seal(settled: boolean): ToolCallSeal {
      if (sealed) throw new Error('tool-call log is already sealed');
      sealed = true;
      if (running.size > 0) markBroken(`${String(running.size)} tool call(s) started but never finished`);
      if (held.size > 0) markBroken(`${String(held.size)} finished tool call(s) could not be written in ordinal order`);
      if (!settled) markBroken('the agent never settled');
      if (fd !== undefined) {
        closeSync(fd);
        fd = undefined;
      }
      // Hash what is on disk and compare it with what was written: a short or foreign write
      // shows up as a failed seal rather than as a seal the supervisor would reject.
      const runningHash = logHash.digest('hex');
      let logSha256 = runningHash;
      try {
        const logFd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
        try {
          logSha256 = sha256Hex(readFileSync(logFd));
        } finally {
          closeSync(logFd);
        }
        if (logSha256 !== runningHash) markBroken('log file bytes differ from the bytes written');
      } catch (err) {
        markBroken(`log could not be read back: ${err instanceof Error ? err.message : String(err)}`);
      }
      const seal: ToolCallSeal = {
        schema_version: SCHEMA.toolCallSeal,
        status: broken === undefined ? 'complete' : 'failed',
        record_count: recordCount,
        total_result_bytes: totalResultBytes,
        log_sha256: logSha256,
      };
      const sealFd = createExclusive(sealPath);
      try {
        fchmodSync(sealFd, FILE_MODE);
        writeAllSync(sealFd, Buffer.from(`${JSON.stringify(seal)}\n`, 'utf8'));
      } finally {
        closeSync(sealFd);
      }
      fsyncDir(options.dir);
      return seal;
    },
  };
}
