/**
 * Prompt-budget planning. The forecast runs at preflight, before any child: each stage's
 * worst-case prompt is estimated from the canonical input and the fixed output caps of the
 * stages that feed it. A stage over its budget fails the submit with
 * `prompt_budget_exceeded_forecast`, naming the stage and the setting that changes its budget;
 * nothing is launched.
 *
 * Budgets come from the roster: `budgets.<stage>` in the models file, else the serving model's
 * `contextWindowTokens` (minus its output reservation), else a default. The repair stage runs
 * only when the evaluator's output is invalid, so the forecast never refuses a request for it:
 * its worst case is planned and checked on the exact prompt if it ever runs.
 */
import { OUTPUT_CAPS } from './constants.js';
import { FusionError } from '../errors.js';

export const BUDGET_STAGES = ['candidate', 'evaluator', 'repair', 'merger'] as const;
export type BudgetStage = (typeof BUDGET_STAGES)[number];

/** Stages that may never run: planned, but never a reason to refuse a request up front. */
const OPTIONAL_STAGES: ReadonlySet<BudgetStage> = new Set(['repair']);

export interface StageBudget {
  /** Estimated prompt tokens in the worst case. */
  forecastTokens: number;
  /** The stage's prompt budget in tokens. */
  budgetTokens: number;
  /** The setting that changes this budget, in words (named by every budget error). */
  setting?: string;
  /** The stage runs only when needed (repair): its forecast never refuses a request. */
  optional?: boolean;
}

export interface BudgetPlan {
  schema_version: 'fusion.budget-plan.v1';
  /** Token estimate: bytes / bytesPerToken, rounded up (conservative for English and code). */
  bytesPerToken: number;
  stages: Record<BudgetStage, StageBudget>;
}

export interface BudgetConfig {
  /** Prompt budget per stage in tokens. */
  stageBudgetTokens: Record<BudgetStage, number>;
  /** Where each stage's budget came from, as the setting an admin changes (see `budgetSetting`). */
  settings?: Partial<Record<BudgetStage, string>>;
  /** Fixed instruction text per stage, in bytes (prompt templates). */
  templateBytes: number;
}

export const DEFAULT_STAGE_BUDGET_TOKENS: Readonly<Record<BudgetStage, number>> = { candidate: 120_000, evaluator: 160_000, repair: 180_000, merger: 180_000 };

export const DEFAULT_BUDGET_CONFIG: BudgetConfig = {
  stageBudgetTokens: { ...DEFAULT_STAGE_BUDGET_TOKENS },
  templateBytes: 8 * 1024,
};

/** The words for a budget that no roster set: the models-file key that would set it. */
export function budgetSetting(stage: BudgetStage): string {
  return `"budgets.${stage}" (tokens) in the models file, or "contextWindowTokens" of the ${stage === 'candidate' ? 'candidate models' : stage === 'merger' ? 'merger model' : 'evaluator model'}`;
}

const BYTES_PER_TOKEN = 3;
/** The bound on the validation errors a repair prompt carries (evaluation-schema bounds them). */
const REPAIR_ERRORS_BYTES = 4_000;

export function estimateTokens(bytes: number): number {
  return Math.ceil(bytes / BYTES_PER_TOKEN);
}

export function planBudget(canonicalInputBytes: number, config: BudgetConfig = DEFAULT_BUDGET_CONFIG): BudgetPlan {
  const base = canonicalInputBytes + config.templateBytes;
  const candidates = 3 * OUTPUT_CAPS.candidateBytes;
  const evaluator = base + candidates;
  const forecastBytes: Record<BudgetStage, number> = {
    candidate: base,
    evaluator,
    // What a repair can cost: the evaluator's input once more, the invalid output (capped) and
    // the bounded validation errors.
    repair: evaluator + OUTPUT_CAPS.evaluatorBytes + REPAIR_ERRORS_BYTES,
    merger: base + candidates + OUTPUT_CAPS.evaluatorBytes,
  };
  const stages = Object.fromEntries(
    BUDGET_STAGES.map((stage) => [
      stage,
      {
        forecastTokens: estimateTokens(forecastBytes[stage]),
        budgetTokens: config.stageBudgetTokens[stage],
        setting: config.settings?.[stage] ?? budgetSetting(stage),
        ...(OPTIONAL_STAGES.has(stage) ? { optional: true } : {}),
      },
    ]),
  ) as Record<BudgetStage, StageBudget>;
  return { schema_version: 'fusion.budget-plan.v1', bytesPerToken: BYTES_PER_TOKEN, stages };
}

function remediation(stage: BudgetStage, setting: string): string {
  return stage === 'candidate'
    ? `Remediation: shorten the objective, background, scope or constraints, or raise the candidate budget: ${setting}.`
    : `Remediation: shorten the request (candidate answers are capped at ${OUTPUT_CAPS.candidateBytes} bytes each) or raise the ${stage} budget: ${setting}.`;
}

/** Throws `prompt_budget_exceeded_forecast` for the first stage whose forecast exceeds its budget. */
export function assertForecastWithinBudget(plan: BudgetPlan): void {
  const over = BUDGET_STAGES.map((stage) => ({ stage, ...plan.stages[stage] }))
    .filter((s) => s.forecastTokens > s.budgetTokens && !OPTIONAL_STAGES.has(s.stage))
    .sort((a, b) => b.forecastTokens - b.budgetTokens - (a.forecastTokens - a.budgetTokens));
  const primary = over[0];
  if (!primary) return;
  const excess = primary.forecastTokens - primary.budgetTokens;
  const setting = primary.setting ?? budgetSetting(primary.stage);
  throw new FusionError(
    'prompt_budget_exceeded_forecast',
    `Fusion prompt budget exceeded by ${excess} tokens (forecast ${primary.forecastTokens} > budget ${primary.budgetTokens}). ` +
      `Primary blocking stage: ${primary.stage}. ${remediation(primary.stage, setting)}`,
    { stage: 'preflight', details: { blockingStage: primary.stage, excessTokens: excess, stages: over.map((s) => s.stage), setting } },
  );
}

/** The measured check before each launch, on the exact prompt bytes. */
export function assertMeasuredWithinBudget(stage: BudgetStage, promptBytes: number, plan: BudgetPlan): void {
  const tokens = estimateTokens(promptBytes);
  const budget = plan.stages[stage].budgetTokens;
  if (tokens <= budget) return;
  const setting = plan.stages[stage].setting ?? budgetSetting(stage);
  throw new FusionError(
    'prompt_budget_exceeded_measured',
    `Fusion prompt budget exceeded by ${tokens - budget} tokens (measured ${tokens} > budget ${budget}). ` +
      `Primary blocking stage: ${stage}. ${remediation(stage, setting)}`,
    { stage, details: { blockingStage: stage, measuredTokens: tokens, budgetTokens: budget, setting } },
  );
}
