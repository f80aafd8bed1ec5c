/**
 * The evaluator's output contract (docs/behaviour.md#c1 (to #c3)) and the bounded repair input (docs/behaviour.md#b6).
 *
 * The validator is hand-written rather than zod-driven because the repair turn feeds its error
 * strings back to the evaluator and tests match on them: every error names its full path
 * (`evaluation.candidate_assessments[0].summary must be non-blank`) and uses the exact words of
 * docs/behaviour.md#c3. It collects every error in one pass so one repair can fix them all. `EvaluationSchema`
 * (zod, strict) describes the same shape for code that builds evaluations and for the type.
 */
import { z } from 'zod';
import { SCHEMA, SCHEMA_NS } from '../contracts/constants.js';
import { FusionError } from '../errors.js';

export const CANDIDATE_IDS = ['A', 'B', 'C'] as const;
export type CandidateId = (typeof CANDIDATE_IDS)[number];

/** Not in SCHEMA (constants.ts is shared and not ours to edit); same `<ns>` prefix. */
export const REPAIR_SCHEMA_VERSION = `${SCHEMA_NS}fusion-evaluation-repair.v1` as const;

/** Repair-input bounds (docs/behaviour.md#b6). */
export const REPAIR_ERROR_LIMITS = {
  maxEntries: 24,
  maxEntryChars: 500,
  maxTotalChars: 4000,
} as const;

const nonBlank = z.string().refine((s) => s.trim().length > 0, { message: 'must be non-blank' });
const candidateIdSchema = z.enum(CANDIDATE_IDS);

export const CandidateAssessmentSchema = z
  .object({
    candidate_id: candidateIdSchema,
    summary: nonBlank,
    strengths: z.array(nonBlank),
    limitations: z.array(nonBlank),
    useful_contributions: z.array(nonBlank),
    risks: z.array(nonBlank),
  })
  .strict();

export const ConflictPositionSchema = z.object({ candidate_id: candidateIdSchema, position: nonBlank }).strict();

export const ConflictSchema = z
  .object({ topic: nonBlank, positions: z.array(ConflictPositionSchema), resolution: nonBlank })
  .strict();

export const ContributionSchema = z.object({ candidate_id: candidateIdSchema, contribution: nonBlank }).strict();

export const SynthesisPlanSchema = z
  .object({ must_include: z.array(ContributionSchema), must_resolve: z.array(nonBlank), must_avoid: z.array(nonBlank) })
  .strict();

/**
 * Shape only. The cross-field rules (exactly A, B, C once each; conflicts with ≥ 2 distinct,
 * unique ids) live in `validateEvaluationValue`, which is the authority.
 */
export const EvaluationSchema = z
  .object({
    schema_version: z.literal(SCHEMA.evaluation),
    candidate_assessments: z.array(CandidateAssessmentSchema),
    agreements: z.array(nonBlank),
    conflicts: z.array(ConflictSchema),
    synthesis_plan: SynthesisPlanSchema,
  })
  .strict();

export type CandidateAssessment = z.infer<typeof CandidateAssessmentSchema>;
export type ConflictPosition = z.infer<typeof ConflictPositionSchema>;
export type Conflict = z.infer<typeof ConflictSchema>;
export type Contribution = z.infer<typeof ContributionSchema>;
export type SynthesisPlan = z.infer<typeof SynthesisPlanSchema>;
export type Evaluation = z.infer<typeof EvaluationSchema>;

export type EvaluationValidation = { ok: true; evaluation: Evaluation } | { ok: false; errors: string[]; notJson: boolean };

type Json = Record<string, unknown>;

function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Unknown keys first (in the object's order), then missing keys (in contract order). */
function checkKeys(value: Json, keys: readonly string[], label: string, errors: string[]): void {
  const allowed = new Set(keys);
  for (const key of Object.keys(value)) {
    if (!allowed.has(key)) errors.push(`${label} contains unknown key ${key}`);
  }
  for (const key of keys) {
    if (!Object.prototype.hasOwnProperty.call(value, key)) errors.push(`${label} is missing key ${key}`);
  }
}

function object(value: unknown, keys: readonly string[], label: string, errors: string[]): Json | undefined {
  if (!isRecord(value)) {
    errors.push(`${label} must be an object`);
    return undefined;
  }
  checkKeys(value, keys, label, errors);
  return value;
}

function str(value: unknown, label: string, errors: string[]): string | undefined {
  if (typeof value !== 'string') {
    errors.push(`${label} must be a string`);
    return undefined;
  }
  if (value.trim().length === 0) {
    errors.push(`${label} must be non-blank`);
    return undefined;
  }
  return value;
}

function list<T>(value: unknown, label: string, errors: string[], item: (v: unknown, l: string) => T | undefined): T[] | undefined {
  if (!Array.isArray(value)) {
    errors.push(`${label} must be an array`);
    return undefined;
  }
  const out: T[] = [];
  let complete = true;
  value.forEach((entry: unknown, index) => {
    const parsed = item(entry, `${label}[${index}]`);
    if (parsed === undefined) complete = false;
    else out.push(parsed);
  });
  return complete ? out : undefined;
}

function candidateId(value: unknown, label: string, errors: string[]): CandidateId | undefined {
  if (value === 'A' || value === 'B' || value === 'C') return value;
  errors.push(`${label} must be A, B, or C`);
  return undefined;
}

function stringList(value: unknown, label: string, errors: string[]): string[] | undefined {
  return list(value, label, errors, (v, l) => str(v, l, errors));
}

function assessment(value: unknown, label: string, errors: string[]): CandidateAssessment | undefined {
  const rec = object(value, ['candidate_id', 'summary', 'strengths', 'limitations', 'useful_contributions', 'risks'], label, errors);
  if (rec === undefined) return undefined;
  const candidate_id = candidateId(rec['candidate_id'], `${label}.candidate_id`, errors);
  const summary = str(rec['summary'], `${label}.summary`, errors);
  const strengths = stringList(rec['strengths'], `${label}.strengths`, errors);
  const limitations = stringList(rec['limitations'], `${label}.limitations`, errors);
  const useful_contributions = stringList(rec['useful_contributions'], `${label}.useful_contributions`, errors);
  const risks = stringList(rec['risks'], `${label}.risks`, errors);
  if (!candidate_id || !summary || !strengths || !limitations || !useful_contributions || !risks) return undefined;
  return { candidate_id, summary, strengths, limitations, useful_contributions, risks };
}

function assessments(value: unknown, label: string, errors: string[]): CandidateAssessment[] | undefined {
  if (!Array.isArray(value)) {
    errors.push(`${label} must be an array`);
    return undefined;
  }
  const parsed = list(value, label, errors, (v, l) => assessment(v, l, errors));
  // Ids are checked on every entry that carries a valid one, even if another field of it failed,
  // so a duplicate or a missing candidate is reported in the same pass.
  const ids = value.map((v: unknown) => (isRecord(v) ? v['candidate_id'] : undefined)).filter((id): id is CandidateId => id === 'A' || id === 'B' || id === 'C');
  const distinct = new Set(ids);
  for (const id of CANDIDATE_IDS) {
    if (!distinct.has(id)) errors.push(`${label} must contain candidate ${id}`);
  }
  if (distinct.size !== ids.length) errors.push(`${label} candidate_id values must be unique`);
  if (value.length !== 3) errors.push(`${label} must contain exactly three entries`);
  return parsed;
}

function position(value: unknown, label: string, errors: string[]): ConflictPosition | undefined {
  const rec = object(value, ['candidate_id', 'position'], label, errors);
  if (rec === undefined) return undefined;
  const candidate_id = candidateId(rec['candidate_id'], `${label}.candidate_id`, errors);
  const text = str(rec['position'], `${label}.position`, errors);
  if (!candidate_id || !text) return undefined;
  return { candidate_id, position: text };
}

function conflict(value: unknown, label: string, errors: string[]): Conflict | undefined {
  const rec = object(value, ['topic', 'positions', 'resolution'], label, errors);
  if (rec === undefined) return undefined;
  const topic = str(rec['topic'], `${label}.topic`, errors);
  const rawPositions = rec['positions'];
  const positions = list(rawPositions, `${label}.positions`, errors, (v, l) => position(v, l, errors));
  if (Array.isArray(rawPositions)) {
    const ids = rawPositions.map((v: unknown) => (isRecord(v) ? v['candidate_id'] : undefined)).filter((id): id is CandidateId => id === 'A' || id === 'B' || id === 'C');
    const distinct = new Set(ids);
    if (distinct.size < 2) errors.push(`${label}.positions must include at least two distinct candidates`);
    if (distinct.size !== ids.length) errors.push(`${label}.positions candidate_id values must be unique`);
  }
  const resolution = str(rec['resolution'], `${label}.resolution`, errors);
  if (!topic || !positions || !resolution) return undefined;
  return { topic, positions, resolution };
}

function contribution(value: unknown, label: string, errors: string[]): Contribution | undefined {
  const rec = object(value, ['candidate_id', 'contribution'], label, errors);
  if (rec === undefined) return undefined;
  const candidate_id = candidateId(rec['candidate_id'], `${label}.candidate_id`, errors);
  const text = str(rec['contribution'], `${label}.contribution`, errors);
  if (!candidate_id || !text) return undefined;
  return { candidate_id, contribution: text };
}

function synthesisPlan(value: unknown, label: string, errors: string[]): SynthesisPlan | undefined {
  const rec = object(value, ['must_include', 'must_resolve', 'must_avoid'], label, errors);
  if (rec === undefined) return undefined;
  const must_include = list(rec['must_include'], `${label}.must_include`, errors, (v, l) => contribution(v, l, errors));
  const must_resolve = stringList(rec['must_resolve'], `${label}.must_resolve`, errors);
  const must_avoid = stringList(rec['must_avoid'], `${label}.must_avoid`, errors);
  if (!must_include || !must_resolve || !must_avoid) return undefined;
  return { must_include, must_resolve, must_avoid };
}

const ROOT_KEYS = ['schema_version', 'candidate_assessments', 'agreements', 'conflicts', 'synthesis_plan'] as const;

/** Validates an already-parsed value against the closed contract, collecting every error. */
export function validateEvaluationValue(value: unknown): { ok: true; evaluation: Evaluation } | { ok: false; errors: string[] } {
  const errors: string[] = [];
  const label = 'evaluation';
  if (!isRecord(value)) return { ok: false, errors: [`${label} must be an object`] };
  checkKeys(value, ROOT_KEYS, label, errors);
  const version = value['schema_version'];
  if (Object.prototype.hasOwnProperty.call(value, 'schema_version') && version !== SCHEMA.evaluation) {
    errors.push(typeof version === 'string' ? `${label}.schema_version must be ${SCHEMA.evaluation}` : `${label}.schema_version must be a string`);
  }
  const candidate_assessments = assessments(value['candidate_assessments'], `${label}.candidate_assessments`, errors);
  const agreements = stringList(value['agreements'], `${label}.agreements`, errors);
  const conflicts = list(value['conflicts'], `${label}.conflicts`, errors, (v, l) => conflict(v, l, errors));
  const synthesis_plan = synthesisPlan(value['synthesis_plan'], `${label}.synthesis_plan`, errors);
  if (errors.length > 0 || !candidate_assessments || !agreements || !conflicts || !synthesis_plan) {
    return { ok: false, errors };
  }
  return { ok: true, evaluation: { schema_version: SCHEMA.evaluation, candidate_assessments, agreements, conflicts, synthesis_plan } };
}

/**
 * The whole text must be one JSON value (JSON.parse; surrounding whitespace only). A code fence
 * or prose around the JSON is a contract violation, not something to strip: the repair turn
 * exists to get a clean answer instead.
 */
export function validateEvaluationText(text: string): EvaluationValidation {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text) as unknown;
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    const hint = /^\s*```/.test(text) ? ' (remove the code fence)' : '';
    return { ok: false, notJson: true, errors: [`evaluation must be JSON only${hint}: ${reason}`] };
  }
  const result = validateEvaluationValue(parsed);
  return result.ok ? result : { ok: false, notJson: false, errors: result.errors };
}

function cut(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  if (maxChars <= 0) return '';
  // Cut on a code point boundary so a surrogate pair is never split.
  let end = maxChars - 1;
  const code = text.charCodeAt(end - 1);
  if (end > 0 && code >= 0xd800 && code <= 0xdbff) end -= 1;
  return `${text.slice(0, end)}…`;
}

/**
 * Bounds the errors fed back to the repair turn (docs/behaviour.md#b6): at most 24 entries, each at most 500
 * chars (a cut entry ends in `…`, counted in the 500), at most 4000 chars over all entries (the
 * entry that crosses the line is cut to fit), then `… N more validation errors omitted` when any
 * entry was dropped.
 */
export function boundValidationErrors(errors: readonly string[]): string[] {
  const { maxEntries, maxEntryChars, maxTotalChars } = REPAIR_ERROR_LIMITS;
  const out: string[] = [];
  let total = 0;
  for (const error of errors) {
    if (out.length >= maxEntries) break;
    const remaining = maxTotalChars - total;
    // An entry needs room for at least one character plus `…` to say anything useful.
    if (remaining < 2) break;
    const entry = cut(cut(error, maxEntryChars), remaining);
    out.push(entry);
    total += entry.length;
  }
  const omitted = errors.length - out.length;
  if (omitted > 0) out.push(`… ${omitted} more validation errors omitted`);
  return out;
}

export interface RepairInput {
  schema_version: typeof REPAIR_SCHEMA_VERSION;
  original_blind_input: unknown;
  invalid_output: string;
  validation_errors: string[];
}

/** The repair turn's data (docs/behaviour.md#b6); the errors are bounded here. */
export function buildRepairInput(originalBlindInput: unknown, invalidOutput: string, errors: readonly string[]): RepairInput {
  return {
    schema_version: REPAIR_SCHEMA_VERSION,
    original_blind_input: originalBlindInput,
    invalid_output: invalidOutput,
    validation_errors: boundValidationErrors(errors),
  };
}

/**
 * The run's error when the one repair also fails the contract (docs/behaviour.md#b6). The errors are bounded
 * like the repair input's, so a pathological output cannot make the message unbounded.
 */
export function repairFailedError(errors: readonly string[]): FusionError {
  const bounded = boundValidationErrors(errors);
  return new FusionError('evaluation_invalid', `evaluation schema repair failed: ${bounded.join('; ')}`, {
    stage: 'evaluating',
    details: { validation_errors: bounded },
  });
}
