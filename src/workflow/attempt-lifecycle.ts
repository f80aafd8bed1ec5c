/**
 * The life of one stage attempt, shared by the candidates (a sandbox each) and the no-tool stages
 * (evaluator, repair, merger: a Bree worker thread each). What differs between them is how the
 * child runs and how its output is judged, which the caller's `body` does; everything around it
 * is here, once:
 *
 * - the attempt row is started (a new attempt number, never reusing a sealed log), then its
 *   staging directory, request file and broker socket are made;
 * - `started` and the settled outcome are reported as progress;
 * - a failure is recorded with its code and message; a model failure with the provider's own
 *   (redacted) words, which the child never saw;
 * - whatever the outcome, the broker is closed, every model call made is added to the task's
 *   usage, the staging directory is removed, and the attempt is committed by `settleAttempt`:
 *   outcome, usage and, for a success, the stage's checkpoint in one store transaction, so a
 *   stage that succeeded is never run again after a crash (docs/behaviour.md#b13);
 * - a success joins the result's attempt list only once that commit happened.
 *
 * Attempts a stopped run left `running` are closed as interrupted when the task resumes
 * (fusion-workflow.ts); retrying a failed attempt is the candidate stage's rule alone
 * (candidate-retry.ts), and a retry is a new attempt through here like any other.
 */
import { join } from 'node:path';
import { FusionError, toFusionError } from '../errors.js';
import { canonicalJson } from '../contracts/canonical.js';
import type { ChildRequest } from '../contracts/broker-protocol.js';
import { costOf } from '../contracts/model-config.js';
import { startBroker, type BrokerHandle, type BrokerOptions } from '../broker/broker-server.js';
import { attemptDirName, taskPaths } from '../tasks/paths.js';
import { createStaging, writeRequestFile, type AttemptStaging } from '../launcher/attempt-dirs.js';
import type { ModelProvider } from '../models/port.js';
import { providerPrices } from '../models/roster-config.js';
import type { Logger } from '../log.js';
import { settleAttempt } from './settle-attempt.js';
import type { RunState, UsageEntry, WorkflowDeps } from './stage-context.js';

/** One attempt as its body sees it: where it runs, its broker, and what will be recorded. */
export interface OpenAttempt {
  stage: string;
  attempt: number;
  /** `<stage>.attempt-<n>`: the attempt's directory name and its sandbox label. */
  name: string;
  /** Where the attempt's outputs are kept (`tasks/<id>/attempts/<name>`), packed into its tarball. */
  destDir: string;
  staging: AttemptStaging;
  broker: BrokerHandle;
  log: Logger;
  /** The attempt row's detail; the body adds to it (its exit, counts) as it learns them. */
  detail: Record<string, unknown>;
  /** The attempt's tarball, once packed: recorded whether the attempt then succeeds or fails. */
  tarball?: { path: string; sha256: string } | undefined;
}

/** What a successful body returns: the stage's value and the checkpoint committed with its success. */
export interface AttemptSuccess<T> {
  value: T;
  checkpoint: { key: string; value: unknown };
}

export interface AttemptSpec<T> {
  stage: string;
  provider: ModelProvider;
  /** The child's request, given the attempt number. */
  request: (attempt: number) => ChildRequest;
  /** The broker's options beyond its socket, provider, task and log. */
  broker: (a: { attempt: number; log: Logger; broker: () => BrokerHandle }) => Omit<BrokerOptions, 'socketPath' | 'provider' | 'taskId' | 'log'>;
  body: (a: OpenAttempt) => Promise<AttemptSuccess<T>>;
  /** Stops what the body started (a sandbox, a replay), before the broker closes; never throws. */
  release?: () => Promise<void>;
  /** Added to the settled progress event (the candidates' tool-call count). */
  settledProgress?: (a: OpenAttempt) => Record<string, unknown>;
  /** Logged once the attempt is committed. */
  settledMessage?: string;
}

/** One usage row per stage attempt, priced when the model has prices configured. */
export function usageEntry(stage: string, provider: ModelProvider, usage: { requests: number; inputTokens: number; outputTokens: number }): UsageEntry {
  const cost = costOf({ inputTokens: usage.inputTokens, outputTokens: usage.outputTokens }, providerPrices(provider));
  return { stage, model: provider.id, requests: usage.requests, inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, ...(cost === null ? {} : { cost }) };
}

/** Runs one attempt of `spec.stage` from its row's start to its committed end. */
export async function runAttempt<T>(deps: WorkflowDeps, run: RunState, spec: AttemptSpec<T>): Promise<T> {
  const { stage, provider } = spec;
  const rec = await run.control.store.startAttempt(run.task.id, stage);
  const name = attemptDirName(stage, rec.attempt);
  const destDir = join(taskPaths(deps.tasksDir, run.task.id).attemptsDir, name);
  // Unix socket paths are limited to 107 bytes: keep staging names short. A launcher hands /out
  // and the broker socket to the sandbox's own uid when it starts it; stage workers run on the
  // host as the daemon's user and need no ownership change.
  const staging = createStaging(deps.runRoot, `${run.task.id.slice(-12)}-${name}`, null);
  writeRequestFile(staging, spec.request(rec.attempt));
  const log = run.log.child({ stage, attempt: rec.attempt });
  // The broker's own options may read it (activity counts) once it runs; never before.
  const broker: BrokerHandle = await startBroker({ socketPath: staging.socketPath, provider, taskId: run.task.id, log, ...spec.broker({ attempt: rec.attempt, log, broker: () => broker }) });
  const open: OpenAttempt = { stage, attempt: rec.attempt, name, destDir, staging, broker, log, detail: {} };
  let outcome: 'succeeded' | 'failed' = 'failed';
  let success: AttemptSuccess<T> | undefined;
  try {
    await run.control.progress({ stage, attempt: rec.attempt, event: 'started' });
    success = await spec.body(open);
    outcome = 'succeeded';
    return success.value;
  } catch (err) {
    let fe = toFusionError(err, 'child_failed', stage);
    // A model failure is reported with the provider's own (redacted) words, which the child never saw.
    const modelError = broker.lastModelError;
    if (modelError && fe.code !== 'cancelled') fe = new FusionError('model_error', `${stage} failed: ${modelError.message}`, { stage, cause: fe, details: fe.details });
    // A sandbox's stderr tail (untrusted, truncated) is what an admin needs to see why it failed.
    open.detail = { ...open.detail, error: { code: fe.code, message: fe.message, ...(fe.details.stderr ? { stderr: fe.details.stderr } : {}) } };
    throw fe;
  } finally {
    await spec.release?.();
    await broker.close().catch(() => undefined);
    // Every model call this attempt made was paid for, whether the attempt succeeded or not.
    if (broker.usage.requests > 0) run.usage.push(usageEntry(stage, provider, broker.usage));
    staging.remove();
    const { tarball } = open;
    const settled = await settleAttempt(deps, run, {
      stage, attempt: rec.attempt, status: outcome, detail: open.detail, tarball,
      ...(success ? { checkpoints: [{ key: success.checkpoint.key, value: canonicalJson(success.checkpoint.value) }] } : {}),
    });
    // Named in the result's list only once its success (and checkpoint) committed.
    if (settled.status === 'succeeded' && tarball) run.attempts.push({ stage, attempt: rec.attempt, tarballPath: tarball.path, tarballSha256: tarball.sha256 });
    await run.control.progress({ stage, attempt: rec.attempt, event: settled.status, ...spec.settledProgress?.(open) }).catch(() => undefined);
    if (spec.settledMessage !== undefined) log.info({ outcome: settled.status }, spec.settledMessage);
    // Evidence that could not be stored fails the attempt (it replaces a success being returned).
    if (settled.error !== undefined) throw settled.error; // eslint-disable-line no-unsafe-finally
  }
}
