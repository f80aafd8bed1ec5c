import { describe, expect, it } from 'vitest';
import { DEFAULT_BUDGET_CONFIG, assertForecastWithinBudget, assertMeasuredWithinBudget, planBudget } from '../../../src/tasks/budget.js';

describe('prompt budget (SPEC §B11)', () => {
  it('plans every stage and passes an ordinary request', () => {
    const plan = planBudget(2_000);
    expect(Object.keys(plan.stages)).toEqual(['candidate', 'evaluator', 'repair', 'merger']);
    expect(() => assertForecastWithinBudget(plan)).not.toThrow();
  });

  it('fails the forecast naming the blocking stage and the remedy', () => {
    const plan = planBudget(200_000, { ...DEFAULT_BUDGET_CONFIG, stageBudgetTokens: { candidate: 1_000_000, evaluator: 1_000_000, repair: 10_000, merger: 1_000_000 } });
    let err: any;
    try {
      assertForecastWithinBudget(plan);
    } catch (e) {
      err = e;
    }
    expect(err.code).toBe('prompt_budget_exceeded_forecast');
    expect(err.message).toMatch(/^Fusion prompt budget exceeded by \d+ tokens/);
    expect(err.message).toContain('Primary blocking stage: repair.');
    expect(err.message).toMatch(/Remediation: .+$/);
  });

  it('checks the measured prompt before a launch', () => {
    const plan = planBudget(1_000);
    expect(() => assertMeasuredWithinBudget('candidate', 10_000, plan)).not.toThrow();
    expect(() => assertMeasuredWithinBudget('candidate', 10_000_000, plan)).toThrow(expect.objectContaining({ code: 'prompt_budget_exceeded_measured' }));
  });
});
