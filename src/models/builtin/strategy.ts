/**
 * A search strategy is a fixed list of phases. Each phase is a pure function from the request
 * and the results of the earlier phases to a batch of tool calls; the answer is a pure
 * function of all results. The engine is stateless: on every turn it replays the phases over
 * the transcript (batch k of the conversation = the k-th non-empty phase) and either emits the
 * next batch or the answer. Same transcript → same next step, byte for byte.
 */
import type { Batch, PlannedCall } from './transcript.js';
import type { RequestFields, Term } from './terms.js';

/** Per-run budget; far below the child's 600-call limit, enough for three reads per angle. */
export const MAX_TOOL_CALLS = 20;

export interface SearchContext {
  fields: RequestFields;
  terms: Term[];
  /** Tool names this turn offers. */
  available: ReadonlySet<string>;
}

export type Phase = (ctx: SearchContext, done: readonly Batch[]) => PlannedCall[];

export interface Strategy {
  readonly name: string;
  readonly phases: readonly Phase[];
  answer(ctx: SearchContext, done: readonly Batch[]): string;
}

export type Step = { kind: 'calls'; calls: PlannedCall[] } | { kind: 'answer'; text: string };

/**
 * `mustAnswer`: the turn offers no tools (or must not call them), so answer from what the
 * transcript already holds, leaving the remaining phases empty.
 */
export function nextStep(strategy: Strategy, ctx: SearchContext, recorded: readonly Batch[], mustAnswer = false): Step {
  const done: Batch[] = [];
  let used = 0;
  let next = 0;
  for (const phase of strategy.phases) {
    const budget = MAX_TOOL_CALLS - used;
    const planned = budget > 0 ? phase(ctx, done).filter((c) => ctx.available.has(c.name)).slice(0, budget) : [];
    if (planned.length === 0) {
      done.push([]);
      continue;
    }
    const batch = recorded[next];
    if (batch === undefined) {
      if (!mustAnswer) return { kind: 'calls', calls: planned };
      done.push([]);
      continue;
    }
    next += 1;
    used += batch.length;
    done.push(batch);
  }
  return { kind: 'answer', text: strategy.answer(ctx, done) };
}

/** Results of one tool across the given batches (successful calls only). */
export function resultsOf(batches: readonly Batch[], tool: string): { args: Record<string, unknown>; text: string }[] {
  return batches.flatMap((b) => b.filter((e) => e.name === tool && e.ok).map((e) => ({ args: e.args, text: e.text })));
}

/** One line per failed call, for the answer's "Not verified" section. */
export function failures(batches: readonly Batch[]): string[] {
  const out: string[] = [];
  for (const b of batches) {
    for (const e of b) {
      if (e.ok) continue;
      const first = e.text.split('\n')[0] ?? '';
      out.push(`A ${e.name} call failed: ${first.length > 160 ? `${first.slice(0, 160)}…` : first}`);
    }
  }
  return out;
}

export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
