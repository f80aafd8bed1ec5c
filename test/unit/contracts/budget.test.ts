import { describe, expect, it } from 'vitest';
import { OUTPUT_CAPS } from '../../../src/contracts/constants.js';
import { DEFAULT_BUDGET_CONFIG, assertForecastWithinBudget, assertMeasuredWithinBudget, estimateTokens, planBudget } from '../../../src/contracts/budget.js';

describe('prompt budget', () => {
  it('plans every stage and passes an ordinary request', () => {
    const plan = planBudget(2_000);
    expect(Object.keys(plan.stages)).toEqual(['candidate', 'evaluator', 'repair', 'merger']);
    expect(() => assertForecastWithinBudget(plan)).not.toThrow();
  });

  it('fails the forecast naming the blocking stage, the remedy and the setting that changes the budget', () => {
    const plan = planBudget(200_000, { ...DEFAULT_BUDGET_CONFIG, stageBudgetTokens: { candidate: 1_000_000, evaluator: 10_000, repair: 1_000_000, merger: 1_000_000 } });
    let err: any;
    try {
      assertForecastWithinBudget(plan);
    } catch (e) {
      err = e;
    }
    expect(err.code).toBe('prompt_budget_exceeded_forecast');
    expect(err.message).toMatch(/^Fusion prompt budget exceeded by \d+ tokens/);
    expect(err.message).toContain('Primary blocking stage: evaluator.');
    expect(err.message).toContain('raise the evaluator budget: "budgets.evaluator" (tokens) in the models file, or "contextWindowTokens" of the evaluator model.');
    expect(err.details.setting).toBe('"budgets.evaluator" (tokens) in the models file, or "contextWindowTokens" of the evaluator model');
  });

  it('counts the repair stage only as what it can cost, and never refuses a request for a repair that may not run', () => {
    const plan = planBudget(1_000);
    const evaluator = plan.stages.evaluator.forecastTokens;
    // The evaluator input once more, the capped invalid output and the bounded errors: no second copy of the answers.
    expect(plan.stages.repair.forecastTokens).toBe(estimateTokens(1_000 + DEFAULT_BUDGET_CONFIG.templateBytes + 3 * OUTPUT_CAPS.candidateBytes + OUTPUT_CAPS.evaluatorBytes + 4_000));
    expect(plan.stages.repair.forecastTokens - evaluator).toBeLessThanOrEqual(estimateTokens(OUTPUT_CAPS.evaluatorBytes + 4_000) + 1);
    expect(plan.stages.repair.optional).toBe(true);
    const tight = planBudget(1_000, { ...DEFAULT_BUDGET_CONFIG, stageBudgetTokens: { ...DEFAULT_BUDGET_CONFIG.stageBudgetTokens, repair: 2_000 } });
    expect(() => assertForecastWithinBudget(tight)).not.toThrow();
    // If the repair does run, its exact prompt is still checked, naming the setting.
    expect(() => assertMeasuredWithinBudget('repair', 10_000, tight)).toThrow('raise the repair budget: "budgets.repair" (tokens) in the models file, or "contextWindowTokens" of the evaluator model.');
  });

  it('accepts a 170 KB request with the default budgets (a repair that may never run does not refuse it)', () => {
    expect(() => assertForecastWithinBudget(planBudget(170 * 1024))).not.toThrow();
  });

  it('checks the measured prompt before a launch, naming the configured setting', () => {
    const plan = planBudget(1_000, { ...DEFAULT_BUDGET_CONFIG, settings: { candidate: '"budgets.candidate" in the models file (now 120000 tokens)' } });
    expect(() => assertMeasuredWithinBudget('candidate', 10_000, plan)).not.toThrow();
    expect(() => assertMeasuredWithinBudget('candidate', 10_000_000, plan)).toThrow(expect.objectContaining({ code: 'prompt_budget_exceeded_measured' }));
    expect(() => assertMeasuredWithinBudget('candidate', 10_000_000, plan)).toThrow('raise the candidate budget: "budgets.candidate" in the models file (now 120000 tokens).');
  });
});
