import { describe, expect, it } from 'vitest';
import { SCHEMA } from '../../../src/contracts/constants.js';
import { FusionError } from '../../../src/errors.js';
import {
  EvaluationSchema,
  REPAIR_SCHEMA_VERSION,
  boundValidationErrors,
  buildRepairInput,
  repairFailedError,
  validateEvaluationText,
  validateEvaluationValue,
} from '../../../src/workflow/evaluation-schema.js';

function assessment(id: string): Record<string, unknown> {
  return { candidate_id: id, summary: `summary ${id}`, strengths: ['s'], limitations: [], useful_contributions: ['u'], risks: [] };
}

function valid(): Record<string, unknown> {
  return {
    schema_version: SCHEMA.evaluation,
    candidate_assessments: [assessment('A'), assessment('B'), assessment('C')],
    agreements: ['all agree'],
    conflicts: [
      {
        topic: 't',
        positions: [
          { candidate_id: 'A', position: 'x' },
          { candidate_id: 'B', position: 'y' },
        ],
        resolution: 'r',
      },
    ],
    synthesis_plan: { must_include: [{ candidate_id: 'A', contribution: 'c' }], must_resolve: ['m'], must_avoid: [] },
  };
}

function errorsOf(value: unknown): string[] {
  const r = validateEvaluationText(JSON.stringify(value));
  if (r.ok) throw new Error('expected validation to fail');
  expect(r.notJson).toBe(false);
  return r.errors;
}

describe('validateEvaluationText: JSON only (docs/behaviour.md#c1)', () => {
  it('accepts a valid evaluation and returns it', () => {
    const r = validateEvaluationText(JSON.stringify(valid()));
    expect(r.ok).toBe(true);
    if (r.ok) {
      expect(r.evaluation.candidate_assessments.map((a) => a.candidate_id)).toEqual(['A', 'B', 'C']);
      expect(EvaluationSchema.parse(r.evaluation)).toEqual(r.evaluation);
    }
  });

  it('accepts surrounding whitespace and empty lists', () => {
    const v = valid();
    v['agreements'] = [];
    v['conflicts'] = [];
    v['synthesis_plan'] = { must_include: [], must_resolve: [], must_avoid: [] };
    expect(validateEvaluationText(`\n  ${JSON.stringify(v, null, 2)}\n`).ok).toBe(true);
  });

  it.each([
    ['a ```json fence', '```json\n' + JSON.stringify(valid()) + '\n```'],
    ['trailing prose', JSON.stringify(valid()) + '\nHope this helps!'],
    ['leading prose', 'Here is the evaluation: ' + JSON.stringify(valid())],
    ['empty text', ''],
  ])('rejects %s with /JSON only/', (_name, text) => {
    const r = validateEvaluationText(text);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.notJson).toBe(true);
      expect(r.errors).toHaveLength(1);
      expect(r.errors[0]).toMatch(/JSON only/);
      expect(r.errors[0]).toMatch(/^evaluation must be JSON only/);
    }
  });

  it('rejects a non-object JSON value', () => {
    expect(errorsOf([valid()])).toEqual(['evaluation must be an object']);
    expect(errorsOf('text')).toEqual(['evaluation must be an object']);
  });
});

describe('validateEvaluationText: closed contract and error words (docs/behaviour.md#c2 (and #c3))', () => {
  it.each(['winner', 'scores', 'ranks', 'model'])('extra root key %s → "evaluation contains unknown key %s"', (key) => {
    const v = valid();
    v[key] = key === 'winner' ? 'A' : { A: 1 };
    expect(errorsOf(v)).toEqual([`evaluation contains unknown key ${key}`]);
  });

  it('missing root keys → "is missing key X"', () => {
    const v = valid();
    delete v['agreements'];
    delete v['synthesis_plan'];
    const errors = errorsOf(v);
    expect(errors).toContain('evaluation is missing key agreements');
    expect(errors).toContain('evaluation is missing key synthesis_plan');
  });

  it('wrong schema_version', () => {
    const v = valid();
    v['schema_version'] = 'other.v1';
    expect(errorsOf(v)).toEqual([`evaluation.schema_version must be ${SCHEMA.evaluation}`]);
    v['schema_version'] = 1;
    expect(errorsOf(v)).toEqual(['evaluation.schema_version must be a string']);
  });

  it('must be non-blank / must be a string, with full paths', () => {
    const v = valid();
    const a0 = assessment('A');
    a0['summary'] = '   ';
    a0['strengths'] = ['ok', 5];
    v['candidate_assessments'] = [a0, assessment('B'), assessment('C')];
    v['agreements'] = [''];
    expect(errorsOf(v)).toEqual([
      'evaluation.candidate_assessments[0].summary must be non-blank',
      'evaluation.candidate_assessments[0].strengths[1] must be a string',
      'evaluation.agreements[0] must be non-blank',
    ]);
  });

  it('must be an array', () => {
    const v = valid();
    v['agreements'] = 'x';
    v['conflicts'] = {};
    v['candidate_assessments'] = null;
    const plan = { must_include: 'A', must_resolve: [], must_avoid: 'none' };
    v['synthesis_plan'] = plan;
    const b = assessment('B');
    expect(errorsOf(v)).toEqual([
      'evaluation.candidate_assessments must be an array',
      'evaluation.agreements must be an array',
      'evaluation.conflicts must be an array',
      'evaluation.synthesis_plan.must_include must be an array',
      'evaluation.synthesis_plan.must_avoid must be an array',
    ]);
    v['candidate_assessments'] = [assessment('A'), { ...b, risks: 'none' }, assessment('C')];
    expect(errorsOf(v)).toContain('evaluation.candidate_assessments[1].risks must be an array');
  });

  it('nested unknown and missing keys', () => {
    const v = valid();
    const a = assessment('C');
    a['score'] = 9;
    delete a['risks'];
    v['candidate_assessments'] = [assessment('A'), assessment('B'), a];
    v['synthesis_plan'] = { must_include: [{ candidate_id: 'A', contribution: 'c', weight: 1 }], must_resolve: [] };
    expect(errorsOf(v)).toEqual([
      'evaluation.candidate_assessments[2] contains unknown key score',
      'evaluation.candidate_assessments[2] is missing key risks',
      'evaluation.candidate_assessments[2].risks must be an array',
      'evaluation.synthesis_plan is missing key must_avoid',
      'evaluation.synthesis_plan.must_include[0] contains unknown key weight',
      'evaluation.synthesis_plan.must_avoid must be an array',
    ]);
  });

  it('must be A, B, or C', () => {
    const v = valid();
    v['synthesis_plan'] = { must_include: [{ candidate_id: 'D', contribution: 'c' }], must_resolve: [], must_avoid: [] };
    expect(errorsOf(v)).toEqual(['evaluation.synthesis_plan.must_include[0].candidate_id must be A, B, or C']);
    v['synthesis_plan'] = valid()['synthesis_plan'];
    v['candidate_assessments'] = [assessment('A'), assessment('b'), assessment('C')];
    expect(errorsOf(v)).toEqual([
      'evaluation.candidate_assessments[1].candidate_id must be A, B, or C',
      'evaluation.candidate_assessments must contain candidate B',
    ]);
  });

  it('must contain candidate X, candidate_id values must be unique', () => {
    const v = valid();
    v['candidate_assessments'] = [assessment('A'), assessment('A'), assessment('C')];
    expect(errorsOf(v)).toEqual([
      'evaluation.candidate_assessments must contain candidate B',
      'evaluation.candidate_assessments candidate_id values must be unique',
    ]);
  });

  it('must contain exactly three entries', () => {
    const v = valid();
    v['candidate_assessments'] = [assessment('A'), assessment('B')];
    expect(errorsOf(v)).toEqual([
      'evaluation.candidate_assessments must contain candidate C',
      'evaluation.candidate_assessments must contain exactly three entries',
    ]);
    v['candidate_assessments'] = [assessment('A'), assessment('B'), assessment('C'), assessment('C')];
    expect(errorsOf(v)).toEqual([
      'evaluation.candidate_assessments candidate_id values must be unique',
      'evaluation.candidate_assessments must contain exactly three entries',
    ]);
  });

  it('conflicts: at least two distinct candidates, unique ids', () => {
    const v = valid();
    v['conflicts'] = [
      { topic: 't', positions: [{ candidate_id: 'A', position: 'x' }], resolution: 'r' },
      {
        topic: 't2',
        positions: [
          { candidate_id: 'A', position: 'x' },
          { candidate_id: 'B', position: 'y' },
          { candidate_id: 'A', position: 'z' },
        ],
        resolution: 'r',
      },
      { topic: '', positions: [], resolution: 7 },
    ];
    expect(errorsOf(v)).toEqual([
      'evaluation.conflicts[0].positions must include at least two distinct candidates',
      'evaluation.conflicts[1].positions candidate_id values must be unique',
      'evaluation.conflicts[2].topic must be non-blank',
      'evaluation.conflicts[2].positions must include at least two distinct candidates',
      'evaluation.conflicts[2].resolution must be a string',
    ]);
  });

  it('collects every error in one pass', () => {
    const errors = errorsOf({
      schema_version: SCHEMA.evaluation,
      winner: 'A',
      candidate_assessments: [{ candidate_id: 'A' }],
      conflicts: [{ topic: 't', positions: 'A vs B', resolution: 'r' }],
      synthesis_plan: { must_include: [], must_resolve: [' '], must_avoid: [] },
    });
    expect(errors).toEqual([
      'evaluation contains unknown key winner',
      'evaluation is missing key agreements',
      'evaluation.candidate_assessments[0] is missing key summary',
      'evaluation.candidate_assessments[0] is missing key strengths',
      'evaluation.candidate_assessments[0] is missing key limitations',
      'evaluation.candidate_assessments[0] is missing key useful_contributions',
      'evaluation.candidate_assessments[0] is missing key risks',
      'evaluation.candidate_assessments[0].summary must be a string',
      'evaluation.candidate_assessments[0].strengths must be an array',
      'evaluation.candidate_assessments[0].limitations must be an array',
      'evaluation.candidate_assessments[0].useful_contributions must be an array',
      'evaluation.candidate_assessments[0].risks must be an array',
      'evaluation.candidate_assessments must contain candidate B',
      'evaluation.candidate_assessments must contain candidate C',
      'evaluation.candidate_assessments must contain exactly three entries',
      'evaluation.agreements must be an array',
      'evaluation.conflicts[0].positions must be an array',
      'evaluation.synthesis_plan.must_resolve[0] must be non-blank',
    ]);
  });

  it('validateEvaluationValue agrees with the text form', () => {
    expect(validateEvaluationValue(valid()).ok).toBe(true);
    expect(validateEvaluationValue({ ...valid(), scores: {} })).toEqual({ ok: false, errors: ['evaluation contains unknown key scores'] });
  });
});

describe('boundValidationErrors (docs/behaviour.md#b6)', () => {
  it('passes short lists through unchanged', () => {
    expect(boundValidationErrors(['a', 'b'])).toEqual(['a', 'b']);
    expect(boundValidationErrors([])).toEqual([]);
  });

  it('keeps at most 24 entries, then says how many were omitted', () => {
    const errors = Array.from({ length: 30 }, (_, i) => `error ${i}`);
    const out = boundValidationErrors(errors);
    expect(out).toHaveLength(25);
    expect(out.slice(0, 24)).toEqual(errors.slice(0, 24));
    expect(out[24]).toBe('… 6 more validation errors omitted');
    expect(boundValidationErrors(errors.slice(0, 24))).toEqual(errors.slice(0, 24));
  });

  it('cuts an entry to 500 chars ending in …', () => {
    const long = 'x'.repeat(501);
    const [cut] = boundValidationErrors([long]);
    expect(cut).toHaveLength(500);
    expect(cut?.endsWith('…')).toBe(true);
    expect(cut?.slice(0, 499)).toBe('x'.repeat(499));
    expect(boundValidationErrors(['y'.repeat(500)])).toEqual(['y'.repeat(500)]);
  });

  it('keeps 4000 chars in total, cutting the entry that crosses the line', () => {
    const errors = Array.from({ length: 10 }, (_, i) => String(i).repeat(600));
    const out = boundValidationErrors(errors);
    const kept = out.slice(0, -1);
    expect(kept.every((e) => e.length <= 500 && e.endsWith('…'))).toBe(true);
    expect(kept.reduce((n, e) => n + e.length, 0)).toBe(4000);
    expect(kept).toHaveLength(8);
    expect(out.at(-1)).toBe('… 2 more validation errors omitted');

    const uneven = [...Array.from({ length: 8 }, () => 'a'.repeat(450)), 'b'.repeat(450), 'c'];
    const out2 = boundValidationErrors(uneven);
    // 8 × 450 = 3600; the ninth gets the last 400 chars (399 + …); the tenth is dropped.
    expect(out2[8]).toBe(`${'b'.repeat(399)}…`);
    expect(out2.slice(0, 9).join('').length).toBe(4000);
    expect(out2[9]).toBe('… 1 more validation errors omitted');
    expect(out2).toHaveLength(10);
  });

  it('never splits a surrogate pair', () => {
    const [cut] = boundValidationErrors(['a'.repeat(498) + '😀'.repeat(10)]);
    expect(cut).toBe('a'.repeat(498) + '…');
  });
});

describe('repair input and repair failure', () => {
  it('buildRepairInput carries the original input, invalid output and bounded errors', () => {
    const errors = Array.from({ length: 30 }, (_, i) => `e${i}`);
    const input = buildRepairInput({ schema_version: SCHEMA.blindCandidates }, '```json {}', errors);
    expect(input.schema_version).toBe(REPAIR_SCHEMA_VERSION);
    expect(input.schema_version).toBe('fusion.fusion-evaluation-repair.v1');
    expect(input.original_blind_input).toEqual({ schema_version: SCHEMA.blindCandidates });
    expect(input.invalid_output).toBe('```json {}');
    expect(input.validation_errors).toHaveLength(25);
    expect(Object.keys(input).sort()).toEqual(['invalid_output', 'original_blind_input', 'schema_version', 'validation_errors']);
  });

  it('repairFailedError is evaluation_invalid with the errors joined by "; "', () => {
    const err = repairFailedError(['evaluation contains unknown key winner', 'evaluation is missing key agreements']);
    expect(err).toBeInstanceOf(FusionError);
    expect(err.code).toBe('evaluation_invalid');
    expect(err.message).toBe('evaluation schema repair failed: evaluation contains unknown key winner; evaluation is missing key agreements');
  });
});
