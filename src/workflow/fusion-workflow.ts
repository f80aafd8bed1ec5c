/**
 * The Fusion workflow (docs/behaviour.md#b) as a TaskRunner:
 *   candidates (3 sandboxes, identical prompts) → anonymise (map persisted) → citation checks →
 *   blind evaluator (+ at most one repair) → merger → commit (answer + metadata digests).
 *
 * Each finished step is checkpointed in the store before the next one starts, so restart
 * recovery resumes at the finest committed boundary (docs/behaviour.md#b13): a stage attempt's
 * success commits with its checkpoint in one transaction (a candidate's answer, the evaluator's,
 * repair's and merger's output), and what is derived from them (the evaluation, the checked
 * answer) is checkpointed too; only what had not finished runs again (with new attempt numbers,
 * never reusing a sealed log).
 */
import { randomBytes } from 'node:crypto';
import { FusionError } from '../errors.js';
import { OUTPUT_CAPS, SCHEMA } from '../contracts/constants.js';
import { canonicalJson, sha256Hex } from '../contracts/canonical.js';
import type { TaskRunContext, TaskRunner } from '../tasks/runner-port.js';
import { assertMeasuredWithinBudget, type BudgetPlan } from '../contracts/budget.js';
import { taskPaths } from '../tasks/paths.js';
import { mkdirDurable, writeFileDurable } from '../common/durable-fs.js';
import type { TaskState } from '../contracts/task-state.js';
import { anonymize } from './anonymize.js';
import { checkUrlCitations, describeStatus, type CitationCheck, type DeliveredCitations, type UrlCheck } from '../contracts/citations.js';
import { checkCitations, checkDeliveredCitations } from './citations.js';
import { boundValidationErrors, buildRepairInput, repairFailedError, validateEvaluationText, type Evaluation } from './evaluation-schema.js';
import { findFusionInternals } from './internals-check.js';
import {
  PROMPTS_VERSION,
  candidateSystemPrompt,
  candidateUserPrompt,
  evaluatorSystemPrompt,
  evaluatorUserPrompt,
  mergerSystemPrompt,
  mergerUserPrompt,
  messages,
  promptsSha256,
  repairUserPrompt,
} from '../contracts/prompts.js';
import { candidateKey, candidateTools, runCandidates, type CandidateAnswer, type FinishedCandidate } from './candidate-stage.js';
import { runNoToolStage, stageOutputKey, type NoToolRole } from './no-tool-stage.js';
import { usageJson } from './settle-attempt.js';
import { INTERRUPTED_ATTEMPT_DETAIL } from '../store/port.js';
import { rosterEngines } from '../models/roster.js';
import type { RunState, WorkflowDeps } from './stage-context.js';
import { skippedNotice, snapshotMetadata } from './snapshot-notice.js';
import { sourcesNotice, sourcesNotRead } from './sources-notice.js';

type Letter = 'A' | 'B' | 'C';
const LETTERS: readonly Letter[] = ['A', 'B', 'C'];

const CK = { candidates: 'candidates', fetched: 'fetched-pages', unread: 'unread-sources', anonymization: 'anonymization', evaluation: 'evaluation', merged: 'merged' } as const;

export function createFusionWorkflow(deps: WorkflowDeps): TaskRunner {
  return { run: (ctx) => runFusion(deps, ctx) };
}

async function runFusion(deps: WorkflowDeps, ctx: TaskRunContext): Promise<void> {
  const { task, control } = ctx;
  const models = deps.rosterFor(task.options);
  const run: RunState = {
    roster: models.roster,
    task,
    control,
    signal: ctx.signal,
    log: deps.log.child({ component: 'workflow', taskId: task.id }),
    canonicalInput: JSON.parse(task.canonicalInput) as RunState['canonicalInput'],
    plan: JSON.parse(task.budgetPlan) as BudgetPlan,
    usage: task.usage?.entries ?? [],
    attempts: [],
    fetched: [],
  };
  if (ctx.resume) {
    // Attempts the stopped run left running are closed as what they were: interrupted.
    await control.store.closeRunningAttempts(task.id, INTERRUPTED_ATTEMPT_DETAIL);
    for (const a of await control.store.listAttempts(task.id)) {
      if (a.status === 'succeeded' && a.tarballPath && a.tarballSha256) run.attempts.push({ stage: a.stage, attempt: a.attempt, tarballPath: a.tarballPath, tarballSha256: a.tarballSha256 });
    }
  }
  try {
    await runStages(deps, ctx, run, models);
  } catch (err) {
    // Every model call so far was paid for: a failed or cancelled run keeps its usage (the task
    // may already be terminal, e.g. cancelled, so this writes the column, not a transition).
    if (run.usage.length > 0) await control.store.saveUsage(task.id, usageJson(run.usage)).catch((e: unknown) => run.log.warn({ err: e }, 'could not save the usage of a stopped run'));
    throw err;
  }
}

async function runStages(deps: WorkflowDeps, ctx: TaskRunContext, run: RunState, models: ReturnType<WorkflowDeps['rosterFor']>): Promise<void> {
  const { task, control } = ctx;
  const state: TaskState = task.state;
  const usagePatch = (): { usage: string } => ({ usage: usageJson(run.usage) });

  // Stage 1: candidates.
  let candidates: CandidateAnswer[];
  if (state === 'initializing' || state === 'queued' || state === 'candidates_running') {
    if (state !== 'candidates_running') await control.transition('candidates_running');
    // On resume only the candidates without a committed success run again; the attempts of
    // the interrupted run that no checkpoint names are dropped from the result's list.
    const finished = await finishedCandidates(run);
    const kept = new Set(finished.map((f) => `${candidateKey(f.answer.slot)}:${f.answer.attempt}`));
    run.attempts = run.attempts.filter((a) => !a.stage.startsWith('candidate-') || kept.has(`${a.stage}:${a.attempt}`));
    run.fetched = finished.flatMap((f) => f.fetched);
    if (finished.length > 0) run.log.info({ finished: finished.map((f) => f.answer.slot) }, 'resuming with candidates that had already succeeded');
    const prompt = messages(candidateSystemPrompt(run.canonicalInput.workflow, candidateTools(run.canonicalInput.workflow)), candidateUserPrompt(run.canonicalInput));
    assertMeasuredWithinBudget('candidate', Buffer.byteLength(canonicalJson(prompt)), run.plan);
    // Each success commits with its checkpoint (one transaction): a restart from here does
    // not run that candidate again.
    candidates = await runCandidates(deps, run, prompt, finished);
    await control.store.saveCheckpoint(task.id, CK.fetched, canonicalJson(run.fetched));
    await control.store.saveCheckpoint(task.id, CK.unread, canonicalJson(run.unread ?? []));
    await control.store.saveCheckpoint(task.id, CK.candidates, canonicalJson(candidates));
    await control.transition('candidates_complete', usagePatch());
  } else {
    candidates = JSON.parse(await requireCheckpoint(run, CK.candidates)) as CandidateAnswer[];
    run.fetched = JSON.parse((await control.store.getCheckpoint(task.id, CK.fetched)) ?? '[]') as RunState['fetched'];
    run.unread = JSON.parse((await control.store.getCheckpoint(task.id, CK.unread)) ?? '[]') as NonNullable<RunState['unread']>;
  }

  // Anonymise: the map is persisted before anything downstream sees an answer (docs/behaviour.md#b5).
  let map = await control.store.getCheckpoint(task.id, CK.anonymization);
  if (!map) {
    map = canonicalJson(anonymize(deps.randomBytes4 ?? (() => randomBytes(4))));
    await control.store.saveCheckpoint(task.id, CK.anonymization, map);
  }
  const slots = JSON.parse(map) as Record<Letter, 1 | 2 | 3>;
  const blindCandidates = LETTERS.map((id) => ({ candidate_id: id, response: answerOf(candidates, slots[id]) }));

  // Stage 2: blind evaluation (+ at most one repair).
  let evaluation: Evaluation;
  const evaluationCk = await control.store.getCheckpoint(task.id, CK.evaluation);
  if (evaluationCk !== null) {
    evaluation = JSON.parse(evaluationCk) as Evaluation;
    // Killed between the checkpoint and its transition: the evaluation is done, say so.
    if ((await control.store.getTask(task.id))?.state === 'evaluating') await control.transition('evaluation_complete', usagePatch());
  } else {
    if (run.signal.aborted) throw new FusionError('cancelled', 'the task was cancelled');
    if ((await control.store.getTask(task.id))?.state === 'candidates_complete') await control.transition('evaluating');
    // Only the evaluator/repair attempts whose output committed count; those are not run again.
    await keepCommittedAttempts(run, ['evaluator', 'repair']);
    // Ground truth for the evaluator, for any engine: every citation checked mechanically.
    const citationChecks = await candidateChecks(deps, run, blindCandidates);
    const blindInput = { schema_version: SCHEMA.blindCandidates, canonical_input: run.canonicalInput, candidates: blindCandidates, citation_checks: citationChecks };
    evaluation = await evaluate(deps, run, blindInput);
    await control.store.saveCheckpoint(task.id, CK.evaluation, canonicalJson(evaluation));
    await control.transition('evaluation_complete', usagePatch());
  }

  // Stage 3: merge. A merger answer that passed its checks is a checkpoint: a restart between
  // it and the commit commits without running the merger again.
  if (run.signal.aborted) throw new FusionError('cancelled', 'the task was cancelled');
  if ((await control.store.getTask(task.id))?.state === 'evaluation_complete') await control.transition('merging');
  const mergedCk = await control.store.getCheckpoint(task.id, CK.merged);
  let answer: string;
  if (mergedCk !== null) {
    answer = (JSON.parse(mergedCk) as { answer: string }).answer;
  } else {
    // Only a merger attempt whose output committed counts; that one is not run again.
    await keepCommittedAttempts(run, ['merger']);
    answer = await merge(deps, run, blindCandidates, evaluation);
    await control.store.saveUsage(task.id, usageJson(run.usage));
    await control.store.saveCheckpoint(task.id, CK.merged, canonicalJson({ answer }));
  }

  // The delivered answer is checked quote by quote, whoever wrote it; what could not be
  // confirmed is reported in the result and said plainly in the text.
  const citations = await checkDeliveredCitations(task.repoDir, answer, run.canonicalInput.workflow === 'research' ? run.fetched : null, { worldReadableOnly: deps.sandboxOwner !== null });

  // Commit: answer file + metadata, digests recorded in the same transaction as `completed`.
  const paths = taskPaths(deps.tasksDir, task.id);
  mkdirDurable(paths.resultDir, 0o700);
  const notRead = run.canonicalInput.workflow === 'research'
    ? sourcesNotRead(run.canonicalInput.context.declared_sources.map((s) => s.canonical_url), run.fetched, run.unread ?? [])
    : [];
  const answerText = `${answer}${unconfirmedNotice(citations)}${sourcesNotice(notRead)}${skippedNotice(ctx.repository)}\n`;
  writeFileDurable(paths.answerFile, answerText);
  const answerSha = sha256Hex(answerText);
  const metadata = canonicalJson({
    schema_version: SCHEMA.result,
    task_id: task.id,
    workflow: run.canonicalInput.workflow,
    engine: rosterEngines(run.roster).join('+'),
    models: models.describe(),
    prompts_version: PROMPTS_VERSION,
    prompts_sha256: promptsSha256(),
    canonical_input_sha256: task.canonicalInputSha256,
    answer_sha256: answerSha,
    answer_bytes: Buffer.byteLength(answerText),
    evaluation_sha256: sha256Hex(canonicalJson(evaluation)),
    citations,
    ...(ctx.repository !== undefined ? { repository: snapshotMetadata(ctx.repository) } : {}),
    ...(notRead.length > 0 ? { sources_not_read: notRead } : {}),
    anonymization: slots,
    attempts: run.attempts,
  });
  writeFileDurable(paths.metadataFile, metadata);
  await control.commit(
    {
      taskId: task.id,
      answerPath: paths.answerFile,
      answerSha256: answerSha,
      answerBytes: Buffer.byteLength(answerText),
      answerData: Buffer.from(answerText, 'utf8'),
      metadata,
      metadataSha256: sha256Hex(metadata),
      committedAt: new Date().toISOString(),
    },
    usagePatch(),
  );
}

async function merge(deps: WorkflowDeps, run: RunState, blindCandidates: readonly BlindCandidate[], evaluation: Evaluation): Promise<string> {
  // The merger sees the same mechanical checks (without the file text), so it can keep only the
  // quotes that were confirmed, passage by passage.
  const mergeChecks = Object.fromEntries(Object.entries(await candidateChecks(deps, run, blindCandidates)).map(([id, checks]) => [id, checks.map(withoutActual)]));
  const mergeInput = { schema_version: SCHEMA.mergeInput, canonical_input: run.canonicalInput, candidates: blindCandidates, evaluation, citation_checks: mergeChecks };
  const mergeMessages = messages(mergerSystemPrompt(), mergerUserPrompt(mergeInput));
  assertMeasuredWithinBudget('merger', Buffer.byteLength(canonicalJson(mergeMessages)), run.plan);
  const merged = await runNoToolStage(deps, run, 'merger', mergeMessages, OUTPUT_CAPS.mergerBytes);
  if (merged.overCap) throw new FusionError('child_output_cap', `merger answer exceeds the ${OUTPUT_CAPS.mergerBytes}-byte cap; preserved in the attempt tarball, not truncated`, { stage: 'merger' });
  const answer = merged.text.trim();
  if (answer === '') throw new FusionError('merge_invalid', 'merger returned an empty answer', { stage: 'merger' });
  const internals = findFusionInternals(answer);
  if (internals.length > 0) throw new FusionError('merge_invalid', `merger answer mentions fusion internals: ${internals.slice(0, 5).join(', ')}`, { stage: 'merger' });
  return answer;
}

/**
 * Drops from the result's attempt list the successes of `roles` that no output checkpoint names
 * (left by a run from before success and checkpoint were one commit), keeping the committed one.
 */
async function keepCommittedAttempts(run: RunState, roles: readonly NoToolRole[]): Promise<void> {
  for (const role of roles) {
    const ck = await run.control.store.getCheckpoint(run.task.id, stageOutputKey(role));
    const committed = ck === null ? undefined : (JSON.parse(ck) as { attempt: number }).attempt;
    run.attempts = run.attempts.filter((a) => a.stage !== role || a.attempt === committed);
  }
}

/** The candidates whose success was checkpointed by an earlier run of this task. */
async function finishedCandidates(run: RunState): Promise<FinishedCandidate[]> {
  const out: FinishedCandidate[] = [];
  for (const slot of [1, 2, 3] as const) {
    const value = await run.control.store.getCheckpoint(run.task.id, candidateKey(slot));
    if (value !== null) out.push(JSON.parse(value) as FinishedCandidate);
  }
  return out;
}

async function evaluate(deps: WorkflowDeps, run: RunState, blindInput: Record<string, unknown>): Promise<Evaluation> {
  const evalMessages = messages(evaluatorSystemPrompt(), evaluatorUserPrompt(blindInput));
  assertMeasuredWithinBudget('evaluator', Buffer.byteLength(canonicalJson(evalMessages)), run.plan);
  const first = await runNoToolStage(deps, run, 'evaluator', evalMessages, OUTPUT_CAPS.evaluatorBytes);
  // An oversized evaluation fails; it is not repaired (docs/behaviour.md#b8).
  if (first.overCap) throw new FusionError('child_output_cap', `evaluator output exceeds the ${OUTPUT_CAPS.evaluatorBytes}-byte cap; preserved, not truncated, and not repaired`, { stage: 'evaluator' });
  const checked = validateEvaluationText(first.text);
  if (checked.ok) return checked.evaluation;

  run.log.warn({ errors: checked.errors.length }, 'evaluator output invalid; running the one repair');
  const repairInput = buildRepairInput(blindInput, first.text, boundValidationErrors(checked.errors));
  const repairMessages = messages(evaluatorSystemPrompt(), repairUserPrompt(repairInput));
  assertMeasuredWithinBudget('repair', Buffer.byteLength(canonicalJson(repairMessages)), run.plan);
  const second = await runNoToolStage(deps, run, 'repair', repairMessages, OUTPUT_CAPS.evaluatorBytes);
  if (second.overCap) throw new FusionError('child_output_cap', `evaluator repair output exceeds the ${OUTPUT_CAPS.evaluatorBytes}-byte cap`, { stage: 'repair' });
  const repaired = validateEvaluationText(second.text);
  if (repaired.ok) return repaired.evaluation;
  throw repairFailedError(repaired.errors);
}

type BlindCandidate = { candidate_id: Letter; response: string };

/** Every citation of each anonymous answer, checked: repository lines always, web quotes in research. */
async function candidateChecks(deps: WorkflowDeps, run: RunState, blind: readonly BlindCandidate[]): Promise<Record<string, Array<CitationCheck | UrlCheck>>> {
  return Object.fromEntries(
    await Promise.all(
      blind.map(async (c) => {
        const repoChecks = await checkCitations(run.task.repoDir, c.response, { worldReadableOnly: deps.sandboxOwner !== null });
        const urlChecks = run.canonicalInput.workflow === 'research' ? checkUrlCitations(c.response, run.fetched) : [];
        const checks: Array<CitationCheck | UrlCheck> = [...repoChecks, ...urlChecks];
        return [c.candidate_id, checks] as const;
      }),
    ),
  );
}

function withoutActual(check: CitationCheck | UrlCheck): CitationCheck | UrlCheck {
  if (!('actual' in check)) return check;
  const { actual: _actual, ...rest } = check;
  return rest;
}

/** The closing section that names every citation of the answer its check could not confirm. */
export function unconfirmedNotice(citations: DeliveredCitations): string {
  if (citations.unconfirmed.length === 0) return '';
  const lines = citations.unconfirmed.map((u) => `- \`${u.citation.replace(/`/g, '')}\` ${describeStatus(u.status)}`);
  return [
    '',
    '',
    '## Unconfirmed citations',
    '',
    `${citations.unconfirmed.length} of ${citations.checked} citations in this answer could not be confirmed against the repository${citations.unconfirmed.some((u) => u.kind === 'web') ? ' or the pages fetched for this request' : ''}; treat them as unverified:`,
    '',
    ...lines,
  ].join('\n');
}

function answerOf(candidates: CandidateAnswer[], slot: number): string {
  const found = candidates.find((c) => c.slot === slot);
  if (!found) throw new FusionError('internal_error', `no candidate answer for slot ${slot}`);
  return found.answer;
}

async function requireCheckpoint(run: RunState, key: string): Promise<string> {
  const value = await run.control.store.getCheckpoint(run.task.id, key);
  if (value === null) {
    throw new FusionError('supervisor_restarted', `the daemon restarted while the task was ${run.task.state}, and the ${key} checkpoint needed to resume is missing`, { stage: run.task.state });
  }
  return value;
}
