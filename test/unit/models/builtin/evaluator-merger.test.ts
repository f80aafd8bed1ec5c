import { beforeAll, describe, expect, it } from 'vitest';
import type { CanonicalInput } from '../../../../src/contracts/canonical.js';
import { OUTPUT_CAPS } from '../../../../src/contracts/constants.js';
import { createBuiltinProvider } from '../../../../src/models/builtin/index.js';
import type { Evaluation } from '../../../../src/workflow/evaluation-schema.js';
import { buildRepairInput, validateEvaluationText } from '../../../../src/workflow/evaluation-schema.js';
import { evaluatorSystemPrompt, messages, repairUserPrompt } from '../../../../src/contracts/prompts.js';
import { blindInput, checkCitations, investigateInput, IPADDR_ROOT, runCandidate, runEvaluator, runMerger } from './harness.js';

type Answers = Record<'A' | 'B' | 'C', string>;

const INTERNALS = /\b(?:candidates?|child|children|evaluators?|evaluation|merger|providers?|models?|slots?|builtin|anonymous)\b|\b(?:answer|response) [ABC]\b/iu;

/** An answer that cites a wrong line and claims another file (a second, conflicting opinion). */
const WRONG = [
  'Search terms: `cidr`.',
  '',
  '## Findings',
  '',
  '- `README.md:7` — mentions CIDR ranges',
  '  > `It lets you parse and validate addresses, match them against CIDR ranges, classify them into named ranges (loopback, private, reserved, etc.), convert between IPv4 and IPv6 representations, and work with raw byte arrays.`',
  '- `lib/ipaddr.js:10` — the CIDR parser',
  '  > `function parseCidrRange(text) {`',
  '- `lib/missing.js:3` — helper',
  '  > `const x = 1;`',
  '',
  '## Summary',
  '',
  'The most likely file is `README.md`.',
  '',
].join('\n');

describe('builtin evaluator and merger', () => {
  let input: CanonicalInput;
  let answers: Answers;
  let checks: Record<'A' | 'B' | 'C', unknown[]>;

  beforeAll(async () => {
    input = investigateInput(IPADDR_ROOT, { objective: 'Find where IPv4 CIDR ranges are parsed', background: [], deliverable: 'Name the function and the file' });
    const [a, b] = await Promise.all([
      runCandidate(createBuiltinProvider('definition-search'), IPADDR_ROOT, input),
      runCandidate(createBuiltinProvider('content-search'), IPADDR_ROOT, input),
    ]);
    answers = { A: a.answer, B: WRONG, C: b.answer };
    checks = { A: checkCitations(IPADDR_ROOT, a.answer), B: checkCitations(IPADDR_ROOT, WRONG), C: checkCitations(IPADDR_ROOT, b.answer) };
  });

  async function evaluation(): Promise<{ text: string; value: Evaluation }> {
    const text = await runEvaluator(createBuiltinProvider('content-search'), blindInput(input, answers, checks));
    const result = validateEvaluationText(text);
    if (!result.ok) throw new Error(result.errors.join('; '));
    return { text, value: result.evaluation };
  }

  it('emits a valid evaluation (JSON only, closed contract) from the mechanical checks', async () => {
    const { text, value } = await evaluation();
    expect(text.trimStart().startsWith('{')).toBe(true);
    expect(Buffer.byteLength(JSON.stringify(text))).toBeLessThan(OUTPUT_CAPS.evaluatorBytes);
    expect(value.candidate_assessments.map((a) => a.candidate_id)).toEqual(['A', 'B', 'C']);
    const b = value.candidate_assessments[1];
    expect(b?.summary).toContain('1 of 3 repository citations verified');
    expect(b?.risks).toContain('Cites `lib/ipaddr.js:10`, which quotes text that does not match the file');
    expect(b?.risks).toContain('Cites `lib/missing.js:3`, which names a file that does not exist');
    expect(value.synthesis_plan.must_avoid.some((s) => s.startsWith('`lib/ipaddr.js:10`'))).toBe(true);
    expect(value.synthesis_plan.must_include.some((c) => c.contribution.startsWith('`lib/ipaddr.js:415`'))).toBe(true);
    expect(value.agreements).toContain('`lib/ipaddr.js` is cited with verified lines by A and C');
  });

  it('records the differing "most likely file" claims as a conflict resolved by verified evidence', async () => {
    const { value } = await evaluation();
    expect(value.conflicts).toHaveLength(1);
    const conflict = value.conflicts[0];
    expect(new Set(conflict?.positions.map((p) => p.candidate_id))).toEqual(new Set(['A', 'B', 'C']));
    expect(conflict?.resolution).toMatch(/^Prefer `lib\/ipaddr\.js`/u);
    expect(value.synthesis_plan.must_resolve).toHaveLength(1);
  });

  it('handles the repair input and URL-shaped checks, and is deterministic', async () => {
    const provider = createBuiltinProvider('path-search');
    const blind = blindInput(input, answers, { ...checks, C: [...checks.C, { url: 'https://example.com/a', status: 'quote_not_found' }] });
    const repair = buildRepairInput(blind, '```json\n{}\n```', ['evaluation must be JSON only']);
    const res = await provider.complete({ role: 'repair', taskId: 't', messages: messages(evaluatorSystemPrompt(), repairUserPrompt(repair)), tools: [] });
    const again = await provider.complete({ role: 'repair', taskId: 't', messages: messages(evaluatorSystemPrompt(), repairUserPrompt(repair)), tools: [] });
    expect(res.content).toBe(again.content);
    const result = validateEvaluationText(res.content);
    expect(result.ok).toBe(true);
    if (result.ok) {
      expect(result.evaluation.candidate_assessments[2]?.risks).toContain('Cites https://example.com/a, which quotes text not found on the fetched page');
    }
  });

  it('still emits three assessments when an answer is empty or checks are missing', async () => {
    const text = await runEvaluator(createBuiltinProvider('content-search'), { schema_version: 'x', canonical_input: input, candidates: [{ candidate_id: 'A', response: answers.A }] });
    const result = validateEvaluationText(text);
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.evaluation.candidate_assessments[1]?.summary).toMatch(/^No answer text was provided/u);
  });

  it('merges verified findings into a final answer naming the right file, without internals', async () => {
    const { value } = await evaluation();
    const merged = await runMerger(createBuiltinProvider('definition-search'), input, answers, value, checks);
    expect(merged).toContain('The most likely location is `lib/ipaddr.js`');
    expect(merged).toContain('- `lib/ipaddr.js:415` — defines `parseCIDR`');
    expect(merged).toContain('  > `ipaddr.IPv4.parseCIDR = function (string) {`');
    expect(merged).not.toContain('`lib/ipaddr.js:10`');
    expect(merged).not.toContain('lib/missing.js');
    expect(merged).toContain('`README.md` also relates to the request, but the confirmed evidence points to `lib/ipaddr.js`.');
    expect(merged).not.toMatch(INTERNALS);
    // Every quoted line of the final answer is verified against the repository.
    expect(checkCitations(IPADDR_ROOT, merged).filter((c) => c.status !== 'verified')).toEqual([]);
    // Findings carried by more answers come first.
    const evidence = merged.slice(merged.indexOf('## Evidence'));
    expect(evidence.indexOf('lib/ipaddr.js:415')).toBeLessThan(evidence.indexOf('lib/ipaddr.js:1037'));
    const again = await runMerger(createBuiltinProvider('definition-search'), input, answers, value, checks);
    expect(again).toBe(merged);
  });

  it('says plainly when nothing could be confirmed', async () => {
    const empty: Evaluation = { schema_version: 'fusion.fusion-evaluation.v1', candidate_assessments: [], agreements: [], conflicts: [], synthesis_plan: { must_include: [], must_resolve: [], must_avoid: ['`lib/ipaddr.js:10` (quotes text that does not match the file)'] } };
    const merged = await runMerger(createBuiltinProvider('content-search'), input, { A: WRONG, B: WRONG, C: WRONG }, empty, { A: checks.B, B: checks.B, C: checks.B });
    expect(merged).toContain('No line of the repository or of the declared sources could be confirmed');
    expect(merged).not.toContain('`lib/ipaddr.js:10`');
    expect(merged).not.toMatch(INTERNALS);
  });
});
