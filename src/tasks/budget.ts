/**
 * Prompt-budget planning (SPEC §B1, §B11). The forecast runs at preflight, before any child:
 * each stage's worst-case prompt is estimated from the canonical input and the fixed output
 * caps of the stages that feed it. A stage over its budget fails the submit with
 * `prompt_budget_exceeded_forecast`, naming the stage and the remedy; nothing is launched.
 */
import { OUTPUT_CAPS } from '../contracts/constants.js';
import { FusionError } from '../errors.js';

export const BUDGET_STAGES = ['candidate', 'evaluator', 'repair', 'merger'] as const;
export type BudgetStage = (typeof BUDGET_STAGES)[number];

export interface StageBudget {
  /** Estimated prompt tokens in the worst case. */
  forecastTokens: number;
  /** The stage's prompt budget in tokens. */
  budgetTokens: number;
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
  /** Fixed instruction text per stage, in bytes (prompt templates). */
  templateBytes: number;
}

export const DEFAULT_BUDGET_CONFIG: BudgetConfig = {
  stageBudgetTokens: { candidate: 120_000, evaluator: 160_000, repair: 180_000, merger: 180_000 },
  templateBytes: 8 * 1024,
};

const BYTES_PER_TOKEN = 3;

export function estimateTokens(bytes: number): number {
  return Math.ceil(bytes / BYTES_PER_TOKEN);
}

export function planBudget(canonicalInputBytes: number, config: BudgetConfig = DEFAULT_BUDGET_CONFIG): BudgetPlan {
  const base = canonicalInputBytes + config.templateBytes;
  const candidates = 3 * OUTPUT_CAPS.candidateBytes;
  const forecastBytes: Record<BudgetStage, number> = {
    candidate: base,
    evaluator: base + candidates,
    // The repair prompt carries the blind input again plus the invalid output and bounded errors.
    repair: base + 2 * candidates + OUTPUT_CAPS.evaluatorBytes + 4_000,
    merger: base + candidates + OUTPUT_CAPS.evaluatorBytes,
  };
  const stages = Object.fromEntries(
    BUDGET_STAGES.map((stage) => [stage, { forecastTokens: estimateTokens(forecastBytes[stage]), budgetTokens: config.stageBudgetTokens[stage] }]),
  ) as Record<BudgetStage, StageBudget>;
  return { schema_version: 'fusion.budget-plan.v1', bytesPerToken: BYTES_PER_TOKEN, stages };
}

function remediation(stage: BudgetStage): string {
  return stage === 'candidate'
    ? 'Remediation: shorten the objective, background, scope or constraints, or raise the candidate prompt budget.'
    : `Remediation: shorten the request (candidate answers are capped at ${OUTPUT_CAPS.candidateBytes} bytes each) or raise the ${stage} prompt budget.`;
}

/** Throws `prompt_budget_exceeded_forecast` for the first stage whose forecast exceeds its budget. */
export function assertForecastWithinBudget(plan: BudgetPlan): void {
  const over = BUDGET_STAGES.map((stage) => ({ stage, ...plan.stages[stage] }))
    .filter((s) => s.forecastTokens > s.budgetTokens)
    .sort((a, b) => b.forecastTokens - b.budgetTokens - (a.forecastTokens - a.budgetTokens));
  const primary = over[0];
  if (!primary) return;
  const excess = primary.forecastTokens - primary.budgetTokens;
  throw new FusionError(
    'prompt_budget_exceeded_forecast',
    `Fusion prompt budget exceeded by ${excess} tokens (forecast ${primary.forecastTokens} > budget ${primary.budgetTokens}). ` +
      `Primary blocking stage: ${primary.stage}. ${remediation(primary.stage)}`,
    { stage: 'preflight', details: { blockingStage: primary.stage, excessTokens: excess, stages: over.map((s) => s.stage) } },
  );
}

/** The measured check before each launch, on the exact prompt bytes (SPEC §B11). */
export function assertMeasuredWithinBudget(stage: BudgetStage, promptBytes: number, plan: BudgetPlan): void {
  const tokens = estimateTokens(promptBytes);
  const budget = plan.stages[stage].budgetTokens;
  if (tokens <= budget) return;
  throw new FusionError(
    'prompt_budget_exceeded_measured',
    `Fusion prompt budget exceeded by ${tokens - budget} tokens (measured ${tokens} > budget ${budget}). ` +
      `Primary blocking stage: ${stage}. ${remediation(stage)}`,
    { stage, details: { blockingStage: stage, measuredTokens: tokens, budgetTokens: budget } },
  );
}
