/**
 * Evaluator, repair and merger: one run in a pooled stage worker thread each, no tools, their own broker socket
 * (so every model call of every stage goes through the one place that holds credentials and
 * keeps the record). Output is preserved whole; the cap is checked here (docs/behaviour.md#b8).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FusionError } from '../errors.js';
import { CHILD_LIMITS, SCHEMA } from '../contracts/constants.js';
import type { ChatMessage, ChildOutcome, ChildRequest } from '../contracts/broker-protocol.js';
import { packAttempt } from '../audit/tarball.js';
import { checkAnswerProvenance } from '../audit/cross-check.js';
import { collectOutputs } from '../launcher/attempt-dirs.js';
import { outputBytes } from './candidate-stage.js';
import { runAttempt } from './attempt-lifecycle.js';
import type { RunState, WorkflowDeps } from './stage-context.js';
import type { ModelProvider } from '../models/port.js';

export type NoToolRole = 'evaluator' | 'repair' | 'merger';

export interface StageOutput {
  text: string;
  attempt: number;
  overCap: boolean;
}

/** The checkpoint of a no-tool stage's success: its output, committed with the attempt's outcome. */
export const stageOutputKey = (role: NoToolRole): string => `output-${role}`;

/**
 * Runs the stage once per task: a success committed by an earlier run (its output checkpoint,
 * written in the same transaction as the attempt's success) is returned as it was, never run
 * again (docs/behaviour.md#b13). What the caller derives from it (validation, the evaluation,
 * the merged answer) is deterministic, so deriving it again gives the same result.
 */
export async function runNoToolStage(deps: WorkflowDeps, run: RunState, role: NoToolRole, messages: ChatMessage[], capBytes: number): Promise<StageOutput> {
  const { store } = run.control;
  const done = await store.getCheckpoint(run.task.id, stageOutputKey(role));
  if (done !== null) {
    run.log.info({ stage: role }, 'stage already succeeded: its committed output is used, the stage is not run again');
    return JSON.parse(done) as StageOutput;
  }
  const provider: ModelProvider = role === 'merger' ? run.roster.merger() : run.roster.evaluator();
  return runAttempt(deps, run, {
    stage: role,
    provider,
    request: (attempt): ChildRequest => ({
      schema_version: SCHEMA.childRequest,
      task_id: run.task.id,
      workflow: run.canonicalInput.workflow,
      role,
      slot: null,
      attempt,
      tools: [],
      declared_urls: [],
      messages,
      limits: { max_model_requests: 1, max_tool_calls: 0, max_tool_result_bytes: 0, output_cap_bytes: capBytes },
      compression_prompt: '',
    }),
    broker: () => ({ role, maxModelRequests: 1, declaredUrls: [] }),
    body: async (a) => {
      const { broker, destDir, staging } = a;
      const exit = await deps.stageWorkers.run({
        name: `${run.task.id}:${role}:${a.attempt}`,
        workerData: { requestFile: staging.requestFile, outDir: staging.outDir, brokerSocket: staging.socketPath },
        timeoutMs: deps.stageTimeoutMs ?? CHILD_LIMITS.wallMs,
        maxOldGenerationSizeMb: 256,
        signal: run.signal,
      });
      a.detail = { exit };
      await broker.close();
      if (run.signal.aborted) throw new FusionError('cancelled', `${role} was stopped`, { stage: role });
      collectOutputs(staging.outDir, destDir, 4 * 1024 * 1024);
      a.tarball = await packAttempt(destDir, `${destDir}.tar`);
      if (exit.reason === 'timeout') throw new FusionError('child_timeout', `${role} hit its wall timeout and was stopped`, { stage: role });
      const outcomeFile = join(destDir, 'result.json');
      const childOutcome = existsSync(outcomeFile) ? (JSON.parse(readFileSync(outcomeFile, 'utf8')) as ChildOutcome) : undefined;
      const answerFile = join(destDir, 'answer.md');
      if (!existsSync(answerFile) || (childOutcome && childOutcome.status === 'failed')) {
        const why = childOutcome?.error ? `${childOutcome.error.code}: ${childOutcome.error.message}` : `worker exit code ${exit.exitCode}`;
        throw new FusionError(why.startsWith('model_error') ? 'model_error' : 'child_failed', `${role} produced no answer (${why})`, { stage: role });
      }
      const text = readFileSync(answerFile, 'utf8');
      checkAnswerProvenance(text, broker.records);
      const output: StageOutput = { text, attempt: a.attempt, overCap: outputBytes(text) > capBytes };
      return { value: output, checkpoint: { key: stageOutputKey(role), value: output } };
    },
  });
}
