/**
 * The workflow's hook for replay verification: called for each candidate attempt after its log,
 * seal and broker cross-checks passed, before anything of it reaches the evaluator. Writes the
 * replay record beside the attempt directory (it goes into the task tarball) whether or not the
 * replay agrees, then throws `child_event_invalid` on the first differing result.
 */
import { writeFileSync } from 'node:fs';
import type { ToolCallLogRecord } from '../contracts/broker-record.js';
import type { RunState, WorkflowDeps } from '../workflow/stage-context.js';
import { buildReplayRecord, compareReplay, replayInSandbox, replayInputs, REPLAY_RECORD_SUFFIX, type RawToolCall } from './replay.js';

export interface ReplayAttemptInput {
  /** e.g. `candidate-1.attempt-1`. */
  name: string;
  destDir: string;
  tools: readonly string[];
  logRecords: readonly ToolCallLogRecord[];
  rawCalls: readonly RawToolCall[];
  sandbox: 'auto' | 'bwrap' | 'docker';
  signal: AbortSignal;
}

export async function verifyAttemptByReplay(deps: WorkflowDeps, run: RunState, input: ReplayAttemptInput): Promise<{ replayed: number }> {
  const calls = replayInputs(input.logRecords, input.rawCalls);
  const launcher = await deps.launcherFor(input.sandbox);
  const replayed = await replayInSandbox({
    launcher,
    taskId: run.task.id,
    label: input.name,
    repoDir: run.task.repoDir,
    codeDir: deps.codeDir,
    runRoot: deps.runRoot,
    owner: deps.sandboxOwner,
    limits: deps.sandboxLimits,
    tools: input.tools,
    calls,
    signal: input.signal,
  });
  const record = buildReplayRecord(input.tools, launcher.name, calls, input.logRecords, replayed);
  writeFileSync(`${input.destDir}${REPLAY_RECORD_SUFFIX}`, `${JSON.stringify(record)}\n`, { mode: 0o600, flag: 'wx' });
  compareReplay(input.logRecords, replayed);
  run.log.info({ attemptName: input.name, replayed: replayed.length, backend: launcher.name }, 'tool calls replayed: every result matches');
  return { replayed: replayed.length };
}
