/**
 * The workflow's hook for replay verification of a candidate attempt. `beginAttemptReplay` starts
 * a replay sandbox beside the candidate (fed each tool call as the model asks for it); after the
 * attempt's log, seal and broker cross-checks passed, `complete` binds the replayed calls to the
 * log, writes the replay record (`<task>/replay/<attempt>.json`; in the task tarball as
 * `attempts/<attempt>.replay.json`)
 * whether or not the replay agrees, then throws `child_event_invalid` on the first differing
 * result. Nothing of the attempt reaches the evaluator before that.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { ToolCallLogRecord } from '../contracts/broker-record.js';
import type { RunState, WorkflowDeps } from './stage-context.js';
import type { LauncherName } from '../launcher/port.js';
import {
  alignStreamedReplay, buildReplayRecord, compareReplay, replayInputs, startStreamingReplay, REPLAY_DIR, type RawToolCall,
} from '../audit/replay.js';

export interface AttemptReplayInput {
  /** e.g. `candidate-1.attempt-1`. */
  name: string;
  destDir: string;
  tools: readonly string[];
  /** The broker's live list of raw calls the model asked for. */
  rawCalls: () => readonly RawToolCall[];
  sandbox: 'auto' | LauncherName;
  signal: AbortSignal;
}

export interface AttemptReplay {
  /** The candidate's broker has closed: no call will come any more (the replay finishes meanwhile). */
  endOfCalls(): void;
  /** Call after the candidate's broker closed and its log verified; throws on a mismatch. */
  complete(logRecords: readonly ToolCallLogRecord[]): Promise<{ replayed: number }>;
  abort(): Promise<void>;
}

export async function beginAttemptReplay(deps: WorkflowDeps, run: RunState, input: AttemptReplayInput): Promise<AttemptReplay> {
  const launcher = await deps.launcherFor(input.sandbox);
  const streaming = await startStreamingReplay({
    launcher,
    taskId: run.task.id,
    label: input.name,
    repoDir: run.task.repoDir,
    codeDir: deps.codeDir,
    runRoot: deps.runRoot,
    // Root-owned until the launcher hands /out and the feed socket to the replay's own uid.
    owner: null,
    limits: deps.sandboxLimits,
    tools: input.tools,
    rawCalls: input.rawCalls,
    signal: input.signal,
    ...(deps.replayMetrics ? { metrics: deps.replayMetrics } : {}),
  });
  return {
    abort: () => streaming.abort(),
    endOfCalls: () => streaming.endOfCalls(),
    async complete(logRecords) {
      const raw = input.rawCalls();
      // The arguments replayed are the ones the log records (same digests, same order).
      const calls = replayInputs(logRecords, raw, input.tools, deps.replayMetrics);
      const waitStarted = Date.now();
      const replayed = alignStreamedReplay(logRecords, await streaming.finish());
      const waitedMs = Date.now() - waitStarted;
      const record = buildReplayRecord(input.tools, launcher.name, calls, logRecords, replayed);
      // Kept apart from attempts/ (which holds only attempt directories and their tarballs).
      const dir = join(dirname(dirname(input.destDir)), REPLAY_DIR);
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      writeFileSync(join(dir, `${basename(input.destDir)}.json`), `${JSON.stringify(record)}\n`, { mode: 0o600, flag: 'wx' });
      compareReplay(logRecords, replayed, deps.replayMetrics);
      // waitedMs: how long the attempt waited for its replay after its own checks (the replay's cost in wall time).
      run.log.info({ attemptName: input.name, replayed: replayed.length, backend: launcher.name, waitedMs }, 'tool calls replayed: every result matches');
      return { replayed: replayed.length };
    },
  };
}
