/**
 * Which model serves which stage. The default roster is the offline builtin engine: three
 * genuinely different candidate strategies (content, path and definition search), and the
 * builtin evaluator and merger. Real providers plug in through the same shape.
 */
import type { ModelProvider } from './port.js';

export interface Roster {
  candidate(slot: 1 | 2 | 3): ModelProvider;
  evaluator(): ModelProvider;
  merger(): ModelProvider;
}

export function fixedRoster(candidates: readonly [ModelProvider, ModelProvider, ModelProvider], evaluator: ModelProvider, merger: ModelProvider): Roster {
  return {
    candidate: (slot) => candidates[slot - 1]!,
    evaluator: () => evaluator,
    merger: () => merger,
  };
}

/** Engine names of a roster, for the result metadata ("the result names the engine"). */
export function rosterEngines(roster: Roster): string[] {
  const all = [roster.candidate(1), roster.candidate(2), roster.candidate(3), roster.evaluator(), roster.merger()];
  return [...new Set(all.map((p) => p.engine))].sort();
}
