/**
 * Evaluator, repair and merger: one run in a pooled stage worker thread each, no tools, their own broker socket
 * (so every model call of every stage goes through the one place that holds credentials and
 * keeps the record). Output is preserved whole; the cap is checked here (docs/behaviour.md#b8).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FusionError, toFusionError } from '../errors.js';
import { CHILD_LIMITS, SCHEMA } from '../contracts/constants.js';
import { canonicalJson } from '../contracts/canonical.js';
import type { ChatMessage, ChildOutcome, ChildRequest } from '../contracts/broker-protocol.js';
import { startBroker } from '../broker/broker-server.js';
import { packAttempt } from '../audit/tarball.js';
import { checkAnswerProvenance } from '../audit/cross-check.js';
import { attemptDirName, taskPaths } from '../tasks/paths.js';
import { collectOutputs, createStaging, writeRequestFile } from '../launcher/attempt-dirs.js';
import { outputBytes, usageEntry } from './candidate-stage.js';
import type { RunState, WorkflowDeps } from './stage-context.js';
import { settleAttempt } from './settle-attempt.js';
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
  const rec = await store.startAttempt(run.task.id, role);
  const name = attemptDirName(role, rec.attempt);
  const destDir = join(taskPaths(deps.tasksDir, run.task.id).attemptsDir, name);
  // Stage workers run on the host as the daemon's user: no ownership change needed.
  const staging = createStaging(deps.runRoot, `${run.task.id.slice(-12)}-${name}`, null);
  const request: ChildRequest = {
    schema_version: SCHEMA.childRequest,
    task_id: run.task.id,
    workflow: run.canonicalInput.workflow,
    role,
    slot: null,
    attempt: rec.attempt,
    tools: [],
    declared_urls: [],
    messages,
    limits: { max_model_requests: 1, max_tool_calls: 0, max_tool_result_bytes: 0, output_cap_bytes: capBytes },
    compression_prompt: '',
  };
  writeRequestFile(staging, request);
  const provider: ModelProvider = role === 'merger' ? run.roster.merger() : run.roster.evaluator();
  const log = run.log.child({ stage: role, attempt: rec.attempt });
  const broker = await startBroker({ socketPath: staging.socketPath, provider, role, taskId: run.task.id, maxModelRequests: 1, declaredUrls: [], log });
  let outcome: 'succeeded' | 'failed' = 'failed';
  let detail: Record<string, unknown> = {};
  let tarball: { path: string; sha256: string } | undefined;
  let output: StageOutput | undefined;
  try {
    await run.control.progress({ stage: role, attempt: rec.attempt, event: 'started' });
    const exit = await deps.stageWorkers.run({
      name: `${run.task.id}:${role}:${rec.attempt}`,
      workerData: { requestFile: staging.requestFile, outDir: staging.outDir, brokerSocket: staging.socketPath },
      timeoutMs: deps.stageTimeoutMs ?? CHILD_LIMITS.wallMs,
      maxOldGenerationSizeMb: 256,
      signal: run.signal,
    });
    detail = { exit };
    await broker.close();
    if (run.signal.aborted) throw new FusionError('cancelled', `${role} was stopped`, { stage: role });
    collectOutputs(staging.outDir, destDir, 4 * 1024 * 1024);
    tarball = await packAttempt(destDir, `${destDir}.tar`);
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
    output = { text, attempt: rec.attempt, overCap: outputBytes(text) > capBytes };
    outcome = 'succeeded';
    return output;
  } catch (err) {
    let fe = toFusionError(err, 'child_failed', role);
    // A model failure is reported with the provider's own (redacted) words, which the worker never saw.
    const modelError = broker.lastModelError;
    if (modelError && fe.code !== 'cancelled') fe = new FusionError('model_error', `${role} failed: ${modelError.message}`, { stage: role, cause: fe });
    detail = { ...detail, error: { code: fe.code, message: fe.message } };
    throw fe;
  } finally {
    await broker.close().catch(() => undefined);
    // Every model call this attempt made was paid for, whether the attempt succeeded or not.
    if (broker.usage.requests > 0) run.usage.push(usageEntry(role, provider, broker.usage));
    staging.remove();
    const settled = await settleAttempt(deps, run, {
      stage: role, attempt: rec.attempt, status: outcome, detail, tarball,
      ...(output ? { checkpoints: [{ key: stageOutputKey(role), value: canonicalJson(output) }] } : {}),
    });
    // Named in the result's list only once its success (and output checkpoint) committed.
    if (settled.status === 'succeeded' && tarball) run.attempts.push({ stage: role, attempt: rec.attempt, tarballPath: tarball.path, tarballSha256: tarball.sha256 });
    await run.control.progress({ stage: role, attempt: rec.attempt, event: settled.status }).catch(() => undefined);
    // Evidence that could not be stored fails the attempt (it replaces an output being returned).
    if (settled.error !== undefined) throw settled.error; // eslint-disable-line no-unsafe-finally
  }
}
