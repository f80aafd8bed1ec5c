/**
 * The workflow's hook for replay verification of the candidate attempts. `startCandidateReplay`
 * starts one replay sandbox for the candidate stage of a task; `attempt` feeds it one attempt's
 * tool calls as the model asks for them. After the attempt's log, seal and broker cross-checks
 * passed, `complete` binds the replayed calls to the log, writes the replay record
 * (`<task>/replay/<attempt>.json`; in the task tarball as `attempts/<attempt>.replay.json`)
 * whether or not the replay agrees, then throws on the first differing result:
 * `child_event_invalid`, or `replay_inconclusive` when a wall-clock limit cut either side's
 * result (audit/replay.ts compareReplay), after which the candidate stage gives the candidate one
 * fresh attempt (candidate-retry.ts). Nothing of the attempt reaches the evaluator before that.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { ToolCallLogRecord } from '../contracts/broker-record.js';
import type { RunState, WorkflowDeps } from './stage-context.js';
import type { LauncherName } from '../launcher/port.js';
import {
  alignStreamedReplay, buildReplayRecord, compareReplay, replayInputs, startTaskReplay, REPLAY_DIR, type RawToolCall,
} from '../audit/replay.js';

/** The launch label of a task's replay sandbox (a candidate's is `candidate-N.attempt-M`). */
export const CANDIDATE_REPLAY_LABEL = 'candidates.replay';

export interface AttemptReplayInput {
  /** e.g. `candidate-1.attempt-1`. */
  name: string;
  destDir: string;
  /** The broker's live list of raw calls the model asked for. */
  rawCalls: () => readonly RawToolCall[];
}

export interface AttemptReplay {
  /** The candidate's broker has closed: no call will come any more (the replay finishes meanwhile). */
  endOfCalls(): void;
  /** Call after the candidate's broker closed and its log verified; throws on a mismatch. */
  complete(logRecords: readonly ToolCallLogRecord[]): Promise<{ replayed: number }>;
  abort(): void;
}

export interface CandidateReplay {
  attempt(input: AttemptReplayInput): AttemptReplay;
  /** Every attempt of the stage has settled. */
  close(): Promise<void>;
}

export async function startCandidateReplay(
  deps: WorkflowDeps,
  run: RunState,
  input: { tools: readonly string[]; sandbox: 'auto' | LauncherName; signal: AbortSignal },
): Promise<CandidateReplay> {
  const launcher = await deps.launcherFor(input.sandbox);
  const replay = await startTaskReplay({
    launcher,
    taskId: run.task.id,
    label: CANDIDATE_REPLAY_LABEL,
    repoDir: run.task.repoDir,
    codeDir: deps.codeDir,
    runRoot: deps.runRoot,
    // Root-owned until the launcher hands /out and the feed socket to the replay's own uid.
    owner: null,
    limits: deps.sandboxLimits,
    tools: input.tools,
    signal: input.signal,
    ...(deps.replayMetrics ? { metrics: deps.replayMetrics } : {}),
  });
  return {
    close: () => replay.close(),
    attempt(attempt) {
      const stream = replay.open(attempt.name, attempt.rawCalls);
      return {
        abort: () => stream.abort(),
        endOfCalls: () => stream.endOfCalls(),
        async complete(logRecords) {
          const raw = attempt.rawCalls();
          // The arguments replayed are the ones the log records (same digests, same order).
          const calls = replayInputs(logRecords, raw, input.tools, deps.replayMetrics);
          const waitStarted = Date.now();
          const replayed = alignStreamedReplay(logRecords, await stream.finish());
          const waitedMs = Date.now() - waitStarted;
          const record = buildReplayRecord(input.tools, launcher.name, calls, logRecords, replayed);
          // Kept apart from attempts/ (which holds only attempt directories and their tarballs).
          const dir = join(dirname(dirname(attempt.destDir)), REPLAY_DIR);
          mkdirSync(dir, { recursive: true, mode: 0o700 });
          writeFileSync(join(dir, `${basename(attempt.destDir)}.json`), `${JSON.stringify(record)}\n`, { mode: 0o600, flag: 'wx' });
          compareReplay(logRecords, replayed, deps.replayMetrics);
          // waitedMs: how long the attempt waited for its replay after its own checks (the replay's cost in wall time).
          run.log.info({ attemptName: attempt.name, replayed: replayed.length, backend: launcher.name, waitedMs }, 'tool calls replayed: every result matches');
          return { replayed: replayed.length };
        },
      };
    },
  };
}
