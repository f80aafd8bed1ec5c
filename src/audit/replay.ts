/**
 * Replay verification of a candidate attempt's repository tool calls.
 *
 * The child's log says which calls ran and what each returned (digests only); the broker's
 * record says which calls the model asked for (name + argument digest). The broker also keeps
 * the raw argument text, which binds to both through its digest. The supervisor re-runs each
 * repository call (read/grep/find/ls) from those arguments in a replay sandbox (one per task
 * for the candidates, the same policy and limits as theirs), and compares each result digest
 * with the logged one: a child that lied about what a tool returned fails the attempt with
 * `child_event_invalid`.
 *
 * The replay record (`<task>/replay/<attempt>.json`, kept in the task tarball) holds the raw arguments,
 * the logged digests and what each call depended on, so an offline auditor can replay it again
 * against a checkout and tell a changed repository from a forged result.
 */
import { readFileSync, lstatSync } from 'node:fs';
import { join } from 'node:path';
import { FusionError } from '../errors.js';
import { CANDIDATE_TOOLS, REJECTED_CALL_EVENT } from '../contracts/constants.js';
import { rejectionOf } from '../contracts/tool-rejection.js';
import type { ToolCallLogRecord } from '../contracts/broker-record.js';
import { CANDIDATE_ENV, SANDBOX_PATHS, type Launcher, type SandboxLimits } from '../launcher/port.js';
import { createStaging, writeRequestFile, type SandboxOwner } from '../launcher/attempt-dirs.js';
import { REPLAY_SCHEMA, replayCalls, replayToolLimits, type ReplayCall, type ReplayedCall } from '../../sandbox/replay-core.js';
import { startReplayFeed } from './replay-feed.js';
import { sha256Hex } from '../contracts/sha256.js';

/**
 * What the replay reports to the daemon's metrics. The instruments live in src/metrics/registry.ts
 * and the composition root passes them in (src/instrument.ts); offline verification and tests
 * pass nothing and count nothing.
 */
export interface ReplayMetrics {
  /** A replay sandbox was started on `backend`. */
  launched(backend: string): void;
  /** A replay sandbox did not start, or ended abnormally (`reason`: `replay_launch`, `replay_<exit reason>`). */
  failed(backend: string, reason: string): void;
  /** A replay answered `calls` calls in `seconds`. */
  replayed(calls: number, seconds: number): void;
  /** A replayed or re-judged call differed from what the child logged. */
  mismatched(): void;
  /** A replayed call differed where a wall-clock limit cut either side: the attempt fails `replay_inconclusive`. */
  inconclusive(): void;
}

export const NO_REPLAY_METRICS: ReplayMetrics = { launched: () => undefined, failed: () => undefined, replayed: () => undefined, mismatched: () => undefined, inconclusive: () => undefined };

export const REPLAY_RECORD_SCHEMA = 'fusion.replay-record.v1';
/** In a task tarball the replay record of an attempt is `attempts/<attempt>.replay.json`. */
export const REPLAY_RECORD_SUFFIX = '.replay.json';
/** On disk, replay records live in `<task dir>/replay/<attempt>.json`. */
export const REPLAY_DIR = 'replay';
const MAX_REPLAY_OUTPUT_BYTES = 16 * 1024 * 1024;
const HEX64 = /^[0-9a-f]{64}$/;

/** A raw call as the model asked for it (kept by the broker). */
export interface RawToolCall {
  name: string;
  arguments: string;
}

export interface ReplayRecordCall {
  ordinal: number;
  tool_name: string;
  arguments: string;
  /** What the child logged (and sent to the model). */
  result_sha256: string;
  status: 'ok' | 'error';
  /** What the replay found; equal to result_sha256 for a verified call. */
  replayed_sha256: string;
  /** The child logged that a wall-clock limit cut its result (`timer_cut` of its log record). */
  timer_cut?: true;
  /** The replay's own result was cut by a wall-clock limit. */
  replayed_timer_cut?: true;
  touched: Record<string, string>;
}

export interface ReplayRecord {
  schema_version: typeof REPLAY_RECORD_SCHEMA;
  tools: string[];
  backend: string;
  calls: ReplayRecordCall[];
}

function replayError(what: string, details: Record<string, unknown> = {}): FusionError {
  return new FusionError('child_event_invalid', `tool-call replay failed: ${what}`, { details });
}

const isRepoTool = (name: string): boolean => (CANDIDATE_TOOLS as readonly string[]).includes(name);

/**
 * Binds the broker's raw calls to the log (same name and argument digest, in order) and
 * returns the repository calls to replay. A log longer than the calls is refused here too.
 *
 * A call the child logged as rejected is replayed too, by rule rather than in a sandbox: the
 * model's call must really be one the child had to refuse (an unknown tool for `tools`, or
 * arguments that are not a JSON object), and the logged result must be exactly the refusal text.
 * So a child cannot relabel a valid call as rejected to avoid running (and being checked on) it.
 */
export function replayInputs(logRecords: readonly ToolCallLogRecord[], rawCalls: readonly RawToolCall[], tools: readonly string[], metrics: Pick<ReplayMetrics, 'mismatched'> = NO_REPLAY_METRICS): ReplayCall[] {
  if (logRecords.length > rawCalls.length) throw replayError(`the log has ${logRecords.length} calls but the broker saw ${rawCalls.length}`);
  const calls: ReplayCall[] = [];
  logRecords.forEach((rec, i) => {
    const raw = rawCalls[i]!;
    if (rec.tool_name === REJECTED_CALL_EVENT) {
      if (sha256Hex(raw.arguments) !== rec.arguments_sha256) throw replayError(`call ${i} (${rec.tool_name}) does not match the arguments the model sent`, { ordinal: rec.ordinal });
      const refusal = rejectionOf(raw, tools);
      if (refusal === undefined) {
        metrics.mismatched();
        throw replayError(`call ${i} was logged as rejected, but the model's call to ${JSON.stringify(raw.name.slice(0, 100))} is valid and had to run`, { ordinal: rec.ordinal });
      }
      if (rec.status !== 'error' || rec.result_sha256 !== sha256Hex(refusal)) {
        metrics.mismatched();
        throw replayError(`call ${i} (${rec.tool_name}): the logged refusal differs from the one the rule gives`, { ordinal: rec.ordinal });
      }
      return;
    }
    if (raw.name !== rec.tool_name || sha256Hex(raw.arguments) !== rec.arguments_sha256) {
      throw replayError(`call ${i} (${rec.tool_name}) does not match the arguments the model sent`, { ordinal: rec.ordinal });
    }
    if (isRepoTool(rec.tool_name)) calls.push({ ordinal: rec.ordinal, tool_name: rec.tool_name, arguments: raw.arguments });
  });
  return calls;
}

/**
 * The attempt's answer is not used because a differing call's result depended on a wall-clock
 * limit on one side (or both): the difference can come from the host's load, so it is no proof
 * of a forgery, and no proof of the result either (docs/security.md).
 */
function inconclusive(call: ReplayedCall, logged: ToolCallLogRecord): FusionError {
  const side = call.timer_cut === true && logged.timer_cut === true ? 'the candidate\'s run and the replay were' : call.timer_cut === true ? 'the replay was' : 'the candidate\'s run was';
  return new FusionError(
    'replay_inconclusive',
    `tool-call replay inconclusive: call ${call.ordinal} (${call.tool_name}): the result depended on a time limit on a loaded host (${side} cut short by a wall-clock limit), so the replay can neither confirm nor refute it; the attempt's answer is not used; retry`,
    { details: { ordinal: call.ordinal, tool: call.tool_name, logged: logged.result_sha256, replayed: call.result_sha256, loggedTimerCut: logged.timer_cut === true, replayTimerCut: call.timer_cut === true } },
  );
}

/**
 * Compares replayed digests with the log; throws on the first difference: `child_event_invalid`,
 * or `replay_inconclusive` when either side's result was cut by a wall-clock limit.
 */
export function compareReplay(logRecords: readonly ToolCallLogRecord[], replayed: readonly ReplayedCall[], metrics: Pick<ReplayMetrics, 'mismatched' | 'inconclusive'> = NO_REPLAY_METRICS): void {
  const byOrdinal = new Map(logRecords.map((r) => [r.ordinal, r]));
  for (const call of replayed) {
    const logged = byOrdinal.get(call.ordinal);
    if (logged === undefined) throw replayError(`replayed call ${call.ordinal} is not in the log`);
    if (logged.result_sha256 !== call.result_sha256 || logged.status !== call.status || logged.result_bytes !== call.result_bytes) {
      if (call.timer_cut === true || logged.timer_cut === true) {
        metrics.inconclusive();
        throw inconclusive(call, logged);
      }
      metrics.mismatched();
      throw replayError(
        `call ${call.ordinal} (${call.tool_name}): the logged result (sha256 ${logged.result_sha256.slice(0, 12)}…, ${logged.status}) differs from a replay over the read-only repository (sha256 ${call.result_sha256.slice(0, 12)}…, ${call.status})`,
        { ordinal: call.ordinal, tool: call.tool_name, logged: logged.result_sha256, replayed: call.result_sha256 },
      );
    }
  }
}

export function buildReplayRecord(tools: readonly string[], backend: string, calls: readonly ReplayCall[], logRecords: readonly ToolCallLogRecord[], replayed: readonly ReplayedCall[]): ReplayRecord {
  const byOrdinal = new Map(logRecords.map((r) => [r.ordinal, r]));
  const replayedBy = new Map(replayed.map((r) => [r.ordinal, r]));
  return {
    schema_version: REPLAY_RECORD_SCHEMA,
    tools: [...tools],
    backend,
    calls: calls.map((c) => {
      const logged = byOrdinal.get(c.ordinal);
      const again = replayedBy.get(c.ordinal);
      return {
        ordinal: c.ordinal,
        tool_name: c.tool_name,
        arguments: c.arguments,
        result_sha256: logged?.result_sha256 ?? '',
        status: logged?.status ?? 'error',
        replayed_sha256: again?.result_sha256 ?? '',
        ...(logged?.timer_cut === true ? { timer_cut: true as const } : {}),
        ...(again?.timer_cut === true ? { replayed_timer_cut: true as const } : {}),
        touched: again?.touched ?? {},
      };
    }),
  };
}

function parseReplayed(text: string): ReplayedCall[] {
  const value = JSON.parse(text) as { schema_version?: unknown; calls?: unknown };
  if (value.schema_version !== REPLAY_SCHEMA || !Array.isArray(value.calls)) throw new Error('unexpected replay output');
  return value.calls.map((c: unknown) => {
    const call = c as ReplayedCall;
    if (typeof call.ordinal !== 'number' || typeof call.tool_name !== 'string' || (call.status !== 'ok' && call.status !== 'error') ||
      typeof call.result_bytes !== 'number' || typeof call.result_sha256 !== 'string' || !HEX64.test(call.result_sha256) ||
      typeof call.touched !== 'object' || call.touched === null || (call.timer_cut !== undefined && call.timer_cut !== true)) {
      throw new Error('malformed replayed call');
    }
    return call;
  });
}

export interface SandboxReplayOptions {
  launcher: Launcher;
  taskId: string;
  /** e.g. `candidate-1.attempt-1`. */
  label: string;
  repoDir: string;
  codeDir: string;
  runRoot: string;
  owner: SandboxOwner | null;
  limits: SandboxLimits;
  tools: readonly string[];
  calls: readonly ReplayCall[];
  signal?: AbortSignal;
  metrics?: ReplayMetrics;
}

/** Replays the calls in a fresh sandbox (candidate policy and limits, no broker). */
export async function replayInSandbox(options: SandboxReplayOptions): Promise<ReplayedCall[]> {
  if (options.calls.length === 0) return [];
  const started = Date.now();
  const metrics = options.metrics ?? NO_REPLAY_METRICS;
  // Unix socket paths are short; keep the staging name short like the candidates' own.
  const staging = createStaging(options.runRoot, `${options.taskId.slice(-12)}-${options.label}-rp`, options.owner);
  try {
    writeRequestFile(staging, { schema_version: REPLAY_SCHEMA, tools: options.tools, calls: options.calls });
    metrics.launched(options.launcher.name);
    const handle = await options.launcher.launch({
      taskId: options.taskId,
      label: `${options.label}.replay`,
      repoDir: options.repoDir,
      outDir: staging.outDir,
      codeDir: options.codeDir,
      requestFile: staging.requestFile,
      command: ['node', `${SANDBOX_PATHS.code}/sandbox/replay-main.js`],
      env: { ...CANDIDATE_ENV },
      limits: options.limits,
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const exit = await handle.exit;
    if (exit.reason !== 'exited' || exit.exitCode !== 0) {
      metrics.failed(options.launcher.name, `replay_${exit.reason}`);
      throw new FusionError('child_failed', `the replay sandbox ended ${exit.reason} (exit ${String(exit.exitCode)})`, { details: { stderr: exit.stderrTail.slice(-500) } });
    }
    const out = join(staging.outDir, 'replay.json');
    const st = lstatSync(out);
    if (!st.isFile() || st.size > MAX_REPLAY_OUTPUT_BYTES) throw new FusionError('child_failed', 'the replay sandbox wrote no usable replay.json');
    let replayed: ReplayedCall[];
    try {
      replayed = parseReplayed(readFileSync(out, 'utf8'));
    } catch (err) {
      throw new FusionError('child_failed', `the replay output is invalid: ${(err as Error).message}`);
    }
    if (replayed.length !== options.calls.length || replayed.some((r, i) => r.ordinal !== options.calls[i]!.ordinal)) {
      throw new FusionError('child_failed', 'the replay sandbox did not answer every call in order');
    }
    metrics.replayed(replayed.length, (Date.now() - started) / 1000);
    return replayed;
  } finally {
    staging.remove();
  }
}

/** One attempt's calls in a task's replay sandbox. */
export interface ReplayStream {
  /**
   * No call will come any more (the candidate's broker has closed): the replay may finish its
   * last calls and send its results while the supervisor verifies the attempt's log.
   */
  endOfCalls(): void;
  /** Call once the candidate's broker has closed: waits for the replay of this attempt's calls, by call index. */
  finish(): Promise<ReplayedCall[]>;
  /** The attempt is abandoned: its queued calls are dropped; safe to call more than once. */
  abort(): void;
}

export interface TaskReplay {
  /** Replays the calls of one attempt (named e.g. `candidate-1.attempt-1`) as the model asks for them. */
  open(name: string, rawCalls: () => readonly RawToolCall[]): ReplayStream;
  /** Every attempt has settled: the replay sandbox ends (stopped if it does not at once); safe to call more than once. */
  close(): Promise<void>;
}

/** A task's replay sandbox allows this long to leave once told that no attempt will come. */
const CLOSE_GRACE_MS = 2_000;

/**
 * Starts one replay sandbox for the candidate attempts of a task: it replays each tool call as
 * soon as a model has asked for it (fed from each broker's live list of raw calls), so replaying
 * costs little wall time when the candidates spend their time waiting for the model. One sandbox
 * serves every attempt: one launch, and the repository's files, trees and digests read once for
 * all of them (an identical call of two attempts is replayed once). Each replayed call's
 * `ordinal` is its index in its attempt's raw call list.
 */
export async function startTaskReplay(options: Omit<SandboxReplayOptions, 'calls'>): Promise<TaskReplay> {
  const metrics = options.metrics ?? NO_REPLAY_METRICS;
  const staging = createStaging(options.runRoot, `${options.taskId.slice(-12)}-${options.label}`, options.owner);
  const waiting = new Map<string, { resolve: (calls: ReplayedCall[]) => void; reject: (err: Error) => void }>();
  const arrived = new Map<string, ReplayedCall[] | Error>();
  let ended: FusionError | undefined;
  const deliver = (stream: string, outcome: ReplayedCall[] | Error): void => {
    if (arrived.has(stream)) return;
    arrived.set(stream, outcome);
    const w = waiting.get(stream);
    if (w === undefined) return;
    waiting.delete(stream);
    if (outcome instanceof Error) w.reject(outcome);
    else w.resolve(outcome);
  };
  let feed: Awaited<ReturnType<typeof startReplayFeed>> | undefined;
  let handle: Awaited<ReturnType<Launcher['launch']>> | undefined;
  const cleanup = async (): Promise<void> => {
    if (handle) await handle.kill().catch(() => undefined);
    await feed?.close().catch(() => undefined);
    staging.remove();
  };
  try {
    writeRequestFile(staging, { schema_version: REPLAY_SCHEMA, tools: options.tools, feed: true });
    feed = await startReplayFeed(staging.socketPath, {
      owner: options.owner,
      maxResultBytes: MAX_REPLAY_OUTPUT_BYTES,
      onActivity: () => handle?.markActivity(),
      onResults: (stream, text) => {
        let replayed: ReplayedCall[] | Error;
        try {
          replayed = parseReplayed(text);
        } catch (err) {
          replayed = new FusionError('child_failed', `the replay output is invalid: ${(err as Error).message}`);
        }
        deliver(stream, replayed);
      },
    });
    metrics.launched(options.launcher.name);
    handle = await options.launcher.launch({
      taskId: options.taskId,
      label: options.label,
      repoDir: options.repoDir,
      outDir: staging.outDir,
      codeDir: options.codeDir,
      brokerSocketPath: staging.socketPath,
      requestFile: staging.requestFile,
      command: ['node', `${SANDBOX_PATHS.code}/sandbox/replay-main.js`],
      env: { ...CANDIDATE_ENV },
      limits: options.limits,
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (err) {
    metrics.failed(options.launcher.name, 'replay_launch');
    await cleanup();
    throw err;
  }
  const running = handle;
  const liveFeed = feed;
  let closed = false;
  // However the sandbox ends, a stream still waiting for its results has none coming.
  void running.exit.then((exit) => {
    if (exit.reason !== 'exited' || exit.exitCode !== 0) {
      // Stopped with its stage (a failed sibling, a cancel) or after its last answer is no failure of its own.
      if (!closed && options.signal?.aborted !== true) metrics.failed(options.launcher.name, `replay_${exit.reason}`);
      ended = new FusionError('child_failed', `the replay sandbox ended ${exit.reason} (exit ${String(exit.exitCode)})`, { details: { stderr: exit.stderrTail.slice(-500) } });
    } else {
      ended = new FusionError('child_failed', 'the replay sandbox ended before it answered every attempt');
    }
    for (const stream of [...waiting.keys()]) deliver(stream, ended);
  });
  return {
    open(name, rawCalls) {
      const started = Date.now();
      liveFeed.open(name, rawCalls);
      return {
        endOfCalls: () => liveFeed.end(name),
        async finish() {
          liveFeed.end(name);
          const outcome = arrived.get(name) ?? await new Promise<ReplayedCall[]>((resolve, reject) => {
            if (ended !== undefined) reject(ended);
            else waiting.set(name, { resolve, reject });
          });
          if (outcome instanceof Error) throw outcome;
          metrics.replayed(outcome.length, (Date.now() - started) / 1000);
          return outcome;
        },
        abort: () => liveFeed.end(name, true),
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      liveFeed.markDone();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([running.exit, new Promise((resolve) => { timer = setTimeout(resolve, CLOSE_GRACE_MS); })]);
      clearTimeout(timer);
      await cleanup();
    },
  };
}

/**
 * Maps a streamed replay (ordinal = index in the raw call list) onto the log: log record i is
 * raw call i (replayInputs proved it), so replayed[index] takes that record's ordinal. Calls
 * past the end of the log (the child stopped before running them) are dropped; a repository
 * call in the log that was not replayed is an error.
 */
export function alignStreamedReplay(logRecords: readonly ToolCallLogRecord[], replayed: readonly ReplayedCall[]): ReplayedCall[] {
  const byIndex = new Map(replayed.map((r) => [r.ordinal, r]));
  const out: ReplayedCall[] = [];
  logRecords.forEach((rec, i) => {
    if (!isRepoTool(rec.tool_name)) return;
    const again = byIndex.get(i);
    if (again === undefined || again.tool_name !== rec.tool_name) throw replayError(`call ${rec.ordinal} (${rec.tool_name}) was not replayed`);
    out.push({ ...again, ordinal: rec.ordinal });
  });
  return out;
}

export interface OfflineReplayOutcome {
  ok: boolean;
  /** First failing call, when not ok. */
  ordinal?: number;
  /** `repository_changed`: a recorded digest differs (path named); `mismatch`: the repository is the same and the result is not. */
  reason?: 'repository_changed' | 'mismatch';
  message?: string;
  replayed: number;
  /**
   * Calls whose result differs but depended on a wall-clock limit (the run's, its replay's, or
   * this replay's): neither confirmed nor refuted, reported as "inconclusive (time-limited)".
   */
  inconclusive: Array<{ ordinal: number; message: string }>;
}

/** A call whose recorded or replayed result was cut by a wall-clock limit. */
export function timeLimited(call: Pick<ReplayRecordCall, 'timer_cut' | 'replayed_timer_cut'>): boolean {
  return call.timer_cut === true || call.replayed_timer_cut === true;
}

/** The message of a call the offline replay can neither confirm nor refute. */
export function inconclusiveMessage(call: Pick<ReplayRecordCall, 'ordinal' | 'tool_name'>): string {
  return `call ${call.ordinal} (${call.tool_name}): inconclusive (time-limited): its result depended on a wall-clock limit, so a replay can neither confirm nor refute it`;
}

/**
 * Offline replay of a record against a checkout (`fusion audit verify --replay --repo DIR`). Runs
 * the same deterministic tools in-process: the repository is the auditor's own copy.
 */
export async function replayRecordOffline(record: ReplayRecord, repoDir: string): Promise<OfflineReplayOutcome> {
  const calls = record.calls.map((c) => ({ ordinal: c.ordinal, tool_name: c.tool_name, arguments: c.arguments }));
  const replayed = await replayCalls(repoDir, calls, record.tools, replayToolLimits());
  const inconclusiveCalls: OfflineReplayOutcome['inconclusive'] = [];
  for (const [i, call] of record.calls.entries()) {
    const again = replayed[i];
    if (again === undefined) return { ok: false, ordinal: call.ordinal, reason: 'mismatch', message: `call ${call.ordinal} (${call.tool_name}) was not replayed`, replayed: i, inconclusive: inconclusiveCalls };
    if (again.result_sha256 === call.result_sha256 && again.status === call.status) continue;
    const changed = Object.entries(call.touched).find(([path, digest]) => again.touched[path] !== digest)
      ?? Object.entries(again.touched).find(([path]) => call.touched[path] === undefined);
    if (changed === undefined && (timeLimited(call) || again.timer_cut === true)) {
      inconclusiveCalls.push({ ordinal: call.ordinal, message: inconclusiveMessage(call) });
      continue;
    }
    if (changed !== undefined) {
      return { ok: false, ordinal: call.ordinal, reason: 'repository_changed', message: `repository changed since the run: ${changed[0]} (call ${call.ordinal}, ${call.tool_name}) no longer has the content the run saw`, replayed: i + 1, inconclusive: inconclusiveCalls };
    }
    return { ok: false, ordinal: call.ordinal, reason: 'mismatch', message: `call ${call.ordinal} (${call.tool_name}): the logged result differs from a replay over an unchanged repository`, replayed: i + 1, inconclusive: inconclusiveCalls };
  }
  return { ok: true, replayed: replayed.length, inconclusive: inconclusiveCalls };
}
