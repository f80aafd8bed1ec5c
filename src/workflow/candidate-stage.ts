/**
 * The candidate stage (docs/behaviour.md#b1, docs/behaviour.md#b4, docs/behaviour.md#b8, docs/behaviour.md#d): three sandboxes in parallel with identical
 * prompts; the first failure aborts the siblings and fails the run (never 2-of-3); an attempt is
 * retried once only for a transient launch failure before the child existed, and once only when
 * its replay was inconclusive (candidate-retry.ts). Every attempt's sealed
 * tool-call log is verified and cross-checked against the broker's own record, then the
 * attempt's files are packed into a tarball whose digest is recorded.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FusionError, toFusionError } from '../errors.js';
import { CANDIDATE_TOOLS, CHILD_LIMITS, OUTPUT_CAPS, RESEARCH_FETCH_TOOL, SCHEMA } from '../contracts/constants.js';
import type { ChatMessage, ChildOutcome, ChildRequest } from '../contracts/broker-protocol.js';
import { CANDIDATE_ENV, SANDBOX_PATHS, type LauncherName, type SandboxExit } from '../launcher/port.js';
import { verifyToolCallLog } from '../audit/verify-log.js';
import { checkAnswerProvenance, crossCheckBrokerRecord, crossCheckConversation } from '../audit/cross-check.js';
import { packAttempt } from '../audit/tarball.js';
import { startCandidateReplay, type AttemptReplay, type CandidateReplay } from './replay-attempt.js';
import { activityReporter } from './activity-progress.js';
import { untrusted } from '../log.js';
import { collectOutputs } from '../launcher/attempt-dirs.js';
import { COMPRESSION_PROMPT } from '../contracts/prompts.js';
import type { Fetcher, RunState, WorkflowDeps } from './stage-context.js';
import { runAttempt } from './attempt-lifecycle.js';
import { CANDIDATE_RETRY_REASONS, candidateRetryReason, type CandidateRetryReason } from './candidate-retry.js';

/** The broker's record of an attempt's model calls and fetches, kept in the attempt tarball. */
export const BROKER_RECORD_FILE = 'supervisor.broker-record.json';

export interface CandidateAnswer {
  slot: 1 | 2 | 3;
  attempt: number;
  answer: string;
  tarballPath: string;
  tarballSha256: string;
}

export function outputBytes(text: string): number {
  return Buffer.byteLength(JSON.stringify(text));
}

export function candidateTools(workflow: 'investigate' | 'research'): string[] {
  return workflow === 'research' ? [...CANDIDATE_TOOLS, RESEARCH_FETCH_TOOL] : [...CANDIDATE_TOOLS];
}

/** A candidate whose success is a committed checkpoint: its answer and the pages it fetched. */
export interface FinishedCandidate {
  answer: CandidateAnswer;
  fetched: RunState['fetched'];
}

/** The checkpoint of a candidate's success (committed with the attempt's outcome). */
export const candidateKey = (slot: 1 | 2 | 3): string => `candidate-${slot}`;

/**
 * Runs the candidates not in `finished` (a resumed task re-runs only those that had not
 * succeeded, docs/behaviour.md#b13). Each success is committed with its checkpoint in one store
 * transaction (attempt-lifecycle.ts): a candidate recorded as succeeded is never run again.
 */
export async function runCandidates(
  deps: WorkflowDeps,
  run: RunState,
  messages: ChatMessage[],
  finished: readonly FinishedCandidate[] = [],
): Promise<CandidateAnswer[]> {
  const stageAc = new AbortController();
  const onTaskAbort = (): void => stageAc.abort(run.signal.reason);
  run.signal.addEventListener('abort', onTaskAbort, { once: true });
  let firstError: FusionError | undefined;
  const slots = [1, 2, 3] as const;
  const replay = stageReplay(deps, run, stageAc.signal);
  try {
    const settled = await Promise.allSettled(
      slots.map((slot) => {
        const before = finished.find((f) => f.answer.slot === slot);
        if (before) return Promise.resolve(before.answer);
        return runCandidateWithRetry(deps, run, slot, messages, stageAc.signal, replay.get)
          .catch((err: unknown) => {
          const fe = toFusionError(err, 'child_failed', `candidate-${slot}`);
          if (!firstError) {
            firstError = fe;
            // One failure fails the run: stop the siblings now (docs/behaviour.md#b4).
            stageAc.abort('sibling_failed');
          }
          throw fe;
        });
      }),
    );
    if (run.signal.aborted) throw new FusionError('cancelled', 'the task was cancelled during the candidate stage');
    if (firstError) throw firstError;
    return settled.map((s) => (s as PromiseFulfilledResult<CandidateAnswer>).value);
  } finally {
    await replay.close();
    run.signal.removeEventListener('abort', onTaskAbort);
  }
}

/** How an attempt reaches the stage's replay sandbox (undefined: replay is off). */
type ReplayGetter = () => Promise<CandidateReplay> | undefined;

/**
 * The stage's one replay sandbox, started when the first attempt asks for it. A launch that
 * failed transiently is tried again when an attempt is retried for the same reason.
 */
function stageReplay(deps: WorkflowDeps, run: RunState, signal: AbortSignal): { get: ReplayGetter; close: () => Promise<void> } {
  let starting: Promise<CandidateReplay> | undefined;
  let failed: FusionError | undefined;
  let launches = 0;
  const get: ReplayGetter = () => {
    if (deps.replay === false) return undefined;
    const retry = failed !== undefined && failed.code === 'launch_failed' && failed.retryable && launches < 2 && !signal.aborted;
    if (starting === undefined || retry) {
      failed = undefined;
      launches += 1;
      starting = startCandidateReplay(deps, run, { tools: candidateTools(run.canonicalInput.workflow), sandbox: sandboxChoice(run), signal });
      starting.catch((err: unknown) => {
        failed = toFusionError(err);
      });
    }
    return starting;
  };
  return {
    get,
    async close() {
      const started = await starting?.catch(() => undefined);
      await started?.close().catch(() => undefined);
    },
  };
}

/**
 * Runs attempts of one candidate until one succeeds or one fails for a reason that gets no
 * (further) retry (candidate-retry.ts). Each attempt keeps its own fetched pages: a retried
 * attempt's are dropped from the run's, so the evaluator sees the pages of the answers it judges,
 * as it does after a resume (which reads them from the candidates' checkpoints).
 */
async function runCandidateWithRetry(deps: WorkflowDeps, run: RunState, slot: 1 | 2 | 3, messages: ChatMessage[], signal: AbortSignal, replayFor: ReplayGetter): Promise<CandidateAnswer> {
  const retried = new Set<CandidateRetryReason>();
  for (;;) {
    const pages: RunState['fetched'] = [];
    try {
      return await runCandidateAttempt(deps, run, slot, messages, signal, pages, replayFor);
    } catch (err) {
      const fe = toFusionError(err);
      const reason = candidateRetryReason(fe, retried, signal);
      if (reason === undefined) throw fe;
      retried.add(reason);
      run.fetched = run.fetched.filter((page) => !pages.includes(page));
      run.log.warn({ slot, reason, why: CANDIDATE_RETRY_REASONS[reason], err: fe }, 'candidate attempt failed; retrying the candidate once');
    }
  }
}

async function runCandidateAttempt(
  deps: WorkflowDeps, run: RunState, slot: 1 | 2 | 3, messages: ChatMessage[], signal: AbortSignal, pages: RunState['fetched'], replayFor: ReplayGetter,
): Promise<CandidateAnswer> {
  const stage = `candidate-${slot}`;
  const workflow = run.canonicalInput.workflow;
  const declaredUrls = run.canonicalInput.context.declared_sources.map((s) => s.canonical_url);
  const tools = candidateTools(workflow);
  let handle: Awaited<ReturnType<Awaited<ReturnType<WorkflowDeps['launcherFor']>>['launch']>> | undefined;
  let replay: AttemptReplay | undefined;
  return runAttempt(deps, run, {
    stage,
    provider: run.roster.candidate(slot),
    request: (attempt): ChildRequest => ({
      schema_version: SCHEMA.childRequest,
      task_id: run.task.id,
      workflow,
      role: 'candidate',
      slot,
      attempt,
      tools,
      declared_urls: declaredUrls,
      messages,
      limits: {
        max_model_requests: CHILD_LIMITS.maxModelRequests,
        max_tool_calls: CHILD_LIMITS.maxToolCalls,
        max_tool_result_bytes: CHILD_LIMITS.maxToolResultBytes,
        output_cap_bytes: OUTPUT_CAPS.candidateBytes,
      },
      compression_prompt: COMPRESSION_PROMPT,
    }),
    broker: ({ attempt, broker }) => {
      // Counts read from the broker: its first activity comes after the sandbox starts.
      const reportActivity = activityReporter((data) => run.control.progress(data), () => ({ toolCalls: broker().requestedCalls.length, modelRequests: broker().usage.requests }), { stage, attempt });
      return {
        role: 'candidate',
        maxModelRequests: CHILD_LIMITS.maxModelRequests,
        declaredUrls,
        ...(workflow === 'research' && deps.fetcher ? { fetcher: recordingFetcher(deps.fetcher, run, pages) } : {}),
        onActivity: () => {
          handle?.markActivity();
          reportActivity();
        },
      };
    },
    body: async (a) => {
      const { broker, destDir } = a;
      // Do not believe the child about what the repository tools returned: the stage's replay
      // sandbox re-runs each call as the model asks for it, compared once the log is verified.
      // It starts beside the candidates (not before them): the feed serves every call whenever it connects.
      const replayStarting = replayFor();
      const launcher = await deps.launcherFor(sandboxChoice(run));
      handle = await launcher.launch({
        taskId: run.task.id,
        label: a.name,
        repoDir: run.task.repoDir,
        outDir: a.staging.outDir,
        codeDir: deps.codeDir,
        brokerSocketPath: a.staging.socketPath,
        requestFile: a.staging.requestFile,
        command: ['node', `${SANDBOX_PATHS.code}/sandbox/child-main.js`],
        env: { ...CANDIDATE_ENV },
        limits: deps.sandboxLimits,
        signal,
      });
      if (replayStarting) replay = (await replayStarting).attempt({ name: a.name, destDir, rawCalls: () => broker.requestedCalls });
      // The launcher measures /out (every file and byte, at any depth) and stops the sandbox over its caps.
      const exit = await handle.exit;
      a.detail = { exit: exitSummary(exit) };
      if (exit.outDirOverflow !== undefined) throw new FusionError('child_output_cap', `${stage} wrote ${exit.outDirOverflow}; the sandbox was stopped`, { stage });
      await broker.close();
      // Every call the model asked for is in: the replay finishes while this attempt is verified.
      replay?.endOfCalls();
      if (signal.aborted) throw new FusionError('cancelled', `${stage} was stopped (${String(signal.reason)})`, { stage });
      collectOutputs(a.staging.outDir, destDir, CHILD_LIMITS.maxStdoutBytes + CHILD_LIMITS.maxToolResultBytes);
      // The broker's own record goes into the sealed tarball beside the child's log (written after
      // the copy, so it replaces any file of that name the child made).
      writeFileSync(join(destDir, BROKER_RECORD_FILE), `${JSON.stringify(broker.records)}\n`, { mode: 0o600 });
      const tarball = await packAttempt(destDir, `${destDir}.tar`);
      a.tarball = tarball;
      const answer = judgeExit(stage, exit, destDir);
      const verified = await verifyToolCallLog({ dir: destDir, slot, attempt: a.attempt, allowedTools: tools, declaredUrls });
      // Fetches the child refused on its own (undeclared/non-canonical URL) never reach the broker.
      crossCheckBrokerRecord(verified.records, broker.records, { allowChildOnlyRejections: true });
      // The log and the answer must be what crossed the broker, not what the child says happened.
      crossCheckConversation(verified.records, broker.records);
      checkAnswerProvenance(answer, broker.records);
      if (replay) await replay.complete(verified.records);
      a.detail = { ...a.detail, toolCalls: verified.records.length, answerBytes: Buffer.byteLength(answer) };
      const finished: FinishedCandidate = { answer: { slot, attempt: a.attempt, answer, tarballPath: tarball.path, tarballSha256: tarball.sha256 }, fetched: pages };
      return { value: finished.answer, checkpoint: { key: candidateKey(slot), value: finished } };
    },
    release: async () => {
      if (handle) await handle.kill().catch(() => undefined);
      // Its calls need no replay any more (a no-op once the replay has answered).
      replay?.abort();
    },
    settledProgress: (a) => ({ toolCalls: a.broker.requestedCalls.length }),
    settledMessage: 'candidate attempt settled',
  });
}

/** Keeps what each fetch returned, so the evaluator's URL checks can compare quotes with the page, and why a fetch failed. */
export function recordingFetcher(fetcher: Fetcher, run: RunState, pages: RunState['fetched']): Fetcher {
  return async (req, signal) => {
    const res = await fetcher(req, signal);
    if (res.ok) {
      // Kept per attempt too (the same object): its checkpoint carries its own pages for a
      // resumed run, and a retried attempt's are taken out of the run's.
      const page = { url: res.result.url, content: res.result.content };
      run.fetched.push(page);
      pages.push(page);
    } else if (run.canonicalInput.context.declared_sources.some((s) => s.canonical_url === req.url)) {
      // Declared URLs only: an undeclared URL is never stored anywhere (src/broker/broker-server.ts).
      (run.unread ??= []).push({ url: req.url, reason: `${res.error.code}: ${res.error.message}` });
    }
    return res;
  };
}

function sandboxChoice(run: RunState): 'auto' | LauncherName {
  return run.task.options.sandbox ?? 'auto';
}

function exitSummary(exit: SandboxExit): Record<string, unknown> {
  return { reason: exit.reason, exitCode: exit.exitCode, signal: exit.signal, durationMs: exit.durationMs };
}

/** Maps how the sandbox ended to a task error, or returns the answer. */
function judgeExit(stage: string, exit: SandboxExit, destDir: string): string {
  const stderr = untrusted(exit.stderrTail, 500);
  if (exit.reason === 'wall_timeout' || exit.reason === 'idle_timeout') {
    throw new FusionError('child_timeout', `${stage} hit its ${exit.reason === 'wall_timeout' ? 'wall' : 'idle'} timeout and was killed`, { stage, details: { stderr } });
  }
  if (exit.reason === 'output_cap') throw new FusionError('child_limit_exceeded', `${stage} exceeded its stdout/stderr byte cap and was killed`, { stage });
  const outcomeFile = join(destDir, 'result.json');
  const outcome = existsSync(outcomeFile) ? (JSON.parse(readFileSync(outcomeFile, 'utf8')) as ChildOutcome) : undefined;
  const answerFile = join(destDir, 'answer.md');
  if (exit.exitCode === 3 || outcome?.status === 'output_cap') {
    throw new FusionError('child_output_cap', `${stage} answer exceeds the ${OUTPUT_CAPS.candidateBytes}-byte cap after one compression turn; the output is preserved in the attempt tarball, not truncated`, { stage });
  }
  if (exit.exitCode !== 0 || outcome?.status !== 'answered' || !existsSync(answerFile)) {
    const why = outcome?.error ? `${outcome.error.code}: ${outcome.error.message}` : `exit code ${String(exit.exitCode)}${exit.signal ? `, signal ${exit.signal}` : ''}`;
    throw new FusionError('child_failed', `${stage} failed (${untrusted(why, 300)})`, { stage, details: { stderr } });
  }
  const answer = readFileSync(answerFile, 'utf8');
  if (outputBytes(answer) > OUTPUT_CAPS.candidateBytes) {
    throw new FusionError('child_output_cap', `${stage} answer exceeds the ${OUTPUT_CAPS.candidateBytes}-byte cap; preserved, not truncated`, { stage });
  }
  return answer;
}
