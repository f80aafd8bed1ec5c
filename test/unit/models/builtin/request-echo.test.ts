/**
 * Lines that only repeat the request are not evidence (src/models/builtin/request-echo.ts), and
 * the demo question of `make run` over this very repository, whose Makefile and benchmarks quote
 * it word for word, leads with the file that defines the task state machine, as the README says
 * ("The table is src/contracts/task-state.ts"). Before, the answer led with
 * src/store/sqlite-store.ts (a user of the states) and cited the Makefile's and a benchmark's
 * copies of the question as evidence.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createBuiltinProvider } from '../../../../src/models/builtin/index.js';
import { longestCommonRun, requestEcho, words } from '../../../../src/models/builtin/request-echo.js';
import type { RequestFields } from '../../../../src/models/builtin/terms.js';
import { validateEvaluationText } from '../../../../src/workflow/evaluation-schema.js';
import { ROOT } from '../../../helpers/gates.js';
import { blindInput, checkCitations, investigateInput, runCandidate, runEvaluator, runMerger } from './harness.js';

const fields = (f: Partial<RequestFields>): RequestFields => ({ objective: '', background: [], deliverable: '', scope: [], constraints: [], sourcePurposes: [], ...f });

/** The question `make run` asks, read from the Makefile's `run` target so the test follows it. */
function makeRunQuestion(): { objective: string; background: string[]; deliverable: string } {
  const makefile = readFileSync(join(ROOT, 'Makefile'), 'utf8');
  const flag = (name: string): string => {
    const m = new RegExp(`--${name} "([^"]+)"`, 'u').exec(makefile);
    if (m === null) throw new Error(`the Makefile's run target has no --${name}`);
    return m[1] as string;
  };
  return { objective: flag('objective'), background: [flag('background')], deliverable: flag('deliverable') };
}

describe('the request-echo rule', () => {
  const demo = fields({
    objective: 'Find where the task state machine and its transition table are implemented',
    background: ['The daemon moves each Fusion task through the states of its task state machine (see docs/behaviour.md#b2)'],
    deliverable: 'The file and lines that define the states and allowed transitions',
  });
  const echo = requestEcho(demo);

  it('counts the longest run of shared consecutive words', () => {
    expect(words('The `task` state-machine, v2!')).toEqual(['the', 'task', 'state', 'machine', 'v2']);
    expect(longestCommonRun(words('a b c d x'), words('z a b c d'))).toBe(4);
    expect(longestCommonRun([], ['a'])).toBe(0);
  });

  it('drops a line that repeats a field (or half of it and at least five words) verbatim', () => {
    expect(echo('  --objective "Find where the task state machine and its transition table are implemented" \\')).toBe(true);
    expect(echo("deliverable: 'The file and lines that define the states and allowed transitions',")).toBe(true);
    // 10 of the background's 18 words, in order.
    expect(echo("background: ['The daemon moves each Fusion task through the states of docs/behaviour.md#b2'],")).toBe(true);
  });

  it('keeps lines that share a phrase with the question, and never matches a short field', () => {
    expect(echo(' * The Fusion task state machine (docs/behaviour.md#b2) as one union type and one transition table.')).toBe(false);
    expect(echo('export const TRANSITIONS: Readonly<Record<TaskState, readonly TaskState[]>> = {')).toBe(false);
    // Four words of the objective in a row is a shared phrase, not a quotation.
    expect(echo('// where the task state machine lives')).toBe(false);
    // A field under five words cannot be quoted, only named.
    const short = requestEcho(fields({ objective: 'Where is RetryPolicy defined?', scope: ['retry policy'] }));
    expect(short('/** Where is RetryPolicy defined? See the retry policy. */')).toBe(false);
  });
});

describe('make run over this repository', () => {
  it('leads with src/contracts/task-state.ts and cites no copy of the question', async () => {
    const input = investigateInput(ROOT, makeRunQuestion());
    const strategies = ['content-search', 'path-search', 'definition-search'] as const;
    const runs = await Promise.all(strategies.map((s) => runCandidate(createBuiltinProvider(s), ROOT, input)));
    const answers = { A: runs[0]!.answer, B: runs[1]!.answer, C: runs[2]!.answer };
    const checks = { A: checkCitations(ROOT, answers.A), B: checkCitations(ROOT, answers.B), C: checkCitations(ROOT, answers.C) };
    const evaluation = validateEvaluationText(await runEvaluator(createBuiltinProvider('content-search'), blindInput(input, answers, checks)));
    if (!evaluation.ok) throw new Error(evaluation.errors.join('; '));
    const merged = await runMerger(createBuiltinProvider('content-search'), input, answers, evaluation.evaluation, checks);

    expect(merged.split('\n').find((l) => l.startsWith('The most likely location is'))).toMatch(/^The most likely location is `src\/contracts\/task-state\.ts`, line \d+/u);
    const echo = requestEcho(fields(makeRunQuestion()));
    for (const text of [merged, ...Object.values(answers)]) {
      const quoted = [...text.matchAll(/^\s*> `+ ?(.*?) ?`+$/gmu)].map((m) => m[1] as string);
      expect(quoted.length).toBeGreaterThan(0);
      expect(quoted.filter(echo)).toEqual([]);
    }
    expect(merged).not.toMatch(/`Makefile:5\d`/u);
  }, 120_000);
});
