/**
 * Tool input normalisation for fusion_investigate / fusion_research (docs/behaviour.md#a1 (to #a5)).
 *
 * Hand-rolled rather than zod-driven because the messages are part of the contract (tests and
 * callers match on them) and must be exactly the original implementation's. The zod schemas at
 * the bottom describe the *normalised* shape for other modules (stored requests, fixtures).
 *
 * Check order: arguments object → unknown keys (sorted) → missing keys (declaration order) →
 * objective, background, deliverable, scope, constraints, sources (field order).
 */
import { z } from 'zod';
import { FusionError } from '../errors.js';
import { TOOL_NAMES, type Workflow } from './constants.js';
import { canonicalizeSourceUrl } from './source-url.js';

const NonBlankTrimmedString = z
  .string()
  .min(1)
  .refine((value) => value.trim() === value, { message: 'must be trimmed' });

const CanonicalUrlString = z.string().refine(
  (value) => {
    const canonical = canonicalizeSourceUrl(value);
    return canonical.ok && canonical.url === value;
  },
  { message: 'must be a canonical public http(s) URL' },
);

export const ResearchSourceSchema = z.object({ url: CanonicalUrlString, purpose: NonBlankTrimmedString }).strict();

export const InvestigateArgsSchema = z
  .object({
    objective: NonBlankTrimmedString,
    background: z.array(NonBlankTrimmedString),
    deliverable: NonBlankTrimmedString,
    scope: z.array(NonBlankTrimmedString),
    constraints: z.array(NonBlankTrimmedString),
  })
  .strict();

export const ResearchArgsSchema = z
  .object({
    objective: NonBlankTrimmedString,
    background: z.array(NonBlankTrimmedString),
    deliverable: NonBlankTrimmedString,
    scope: z.array(NonBlankTrimmedString),
    constraints: z.array(NonBlankTrimmedString),
    sources: z
      .array(ResearchSourceSchema)
      .min(1)
      .refine((sources) => new Set(sources.map((source) => source.url)).size === sources.length, {
        message: 'canonical URLs must be unique',
      }),
  })
  .strict();

export type ResearchSource = z.infer<typeof ResearchSourceSchema>;
export type InvestigateArgs = z.infer<typeof InvestigateArgsSchema>;
export type ResearchArgs = z.infer<typeof ResearchArgsSchema>;
export type ToolArgs = InvestigateArgs | ResearchArgs;

const INVESTIGATE_KEYS = ['objective', 'background', 'deliverable', 'scope', 'constraints'] as const;
const INVESTIGATE_REQUIRED = ['objective', 'background', 'deliverable'] as const;
const RESEARCH_KEYS = [...INVESTIGATE_KEYS, 'sources'] as const;
const RESEARCH_REQUIRED = [...INVESTIGATE_REQUIRED, 'sources'] as const;
const SOURCE_KEYS = ['url', 'purpose'] as const;

type Record_ = Record<string, unknown>;

/** Carries the tool name so every failure reports `details: { tool, path? }`. */
class Checker {
  constructor(readonly tool: string) {}

  fail(message: string, path?: string, extra: Record<string, unknown> = {}): never {
    const details: Record<string, unknown> = { tool: this.tool, ...extra };
    if (path !== undefined) details.path = path;
    throw new FusionError('invalid_input', message, { details });
  }

  /** `label` is the message prefix (`fusion_research.sources[0]`); `path` is relative to the args. */
  assertKeys(record: Record_, allowed: readonly string[], required: readonly string[], label: string, path?: string): void {
    // Unknown keys sorted so the message does not depend on the caller's key order.
    const unknown = Object.keys(record).filter((key) => !allowed.includes(key)).sort();
    if (unknown.length > 0) this.fail(`${label} contains unsupported key(s): ${unknown.join(', ')}`, path, { keys: unknown });
    // Missing keys in declaration order (objective, background, …), as docs/behaviour.md#a lists them.
    const missing = required.filter((key) => !Object.hasOwn(record, key));
    if (missing.length > 0) this.fail(`${label} missing required key(s): ${missing.join(', ')}`, path, { keys: missing });
  }

  nonBlankString(value: unknown, path: string): string {
    const label = `${this.tool}.${path}`;
    if (typeof value !== 'string') this.fail(`${label} must be a string`, path);
    const trimmed = value.trim();
    if (trimmed.length === 0) this.fail(`${label} must not be blank`, path);
    return trimmed;
  }

  stringArray(value: unknown, path: string): string[] {
    if (!Array.isArray(value)) this.fail(`${this.tool}.${path} must be an array of strings`, path);
    return value.map((item: unknown, index) => this.nonBlankString(item, `${path}[${String(index)}]`));
  }

  optionalStringArray(record: Record_, key: string): string[] {
    if (!Object.hasOwn(record, key) || record[key] === undefined) return [];
    return this.stringArray(record[key], key);
  }
}

function isRecord(value: unknown): value is Record_ {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function normalizeSources(check: Checker, value: unknown): ResearchSource[] {
  const tool = check.tool;
  if (!Array.isArray(value)) check.fail(`${tool}.sources must be an array`, 'sources');
  if (value.length === 0) check.fail(`${tool}.sources must not be empty`, 'sources');
  const seen = new Map<string, number>();
  return value.map((item: unknown, index) => {
    const path = `sources[${String(index)}]`;
    const label = `${tool}.${path}`;
    if (!isRecord(item)) check.fail(`${label} must be an object`, path);
    check.assertKeys(item, SOURCE_KEYS, SOURCE_KEYS, label, path);
    const rawUrl = check.nonBlankString(item.url, `${path}.url`);
    const canonical = canonicalizeSourceUrl(rawUrl);
    if (!canonical.ok) {
      check.fail(`${label}.url must be a declared public http(s) URL: ${canonical.reason}`, `${path}.url`);
    }
    const previous = seen.get(canonical.url);
    if (previous !== undefined) {
      check.fail(
        `${label}.url duplicates canonical URL from sources[${String(previous)}]: ${canonical.url}`,
        `${path}.url`,
      );
    }
    seen.set(canonical.url, index);
    return { url: canonical.url, purpose: check.nonBlankString(item.purpose, `${path}.purpose`) };
  });
}

/**
 * Validates and normalises a tool call's arguments. Throws FusionError('invalid_input') with the
 * docs/behaviour.md#a message; never touches the file system or network (DNS is not consulted here).
 */
export function normalizeToolInput(workflow: 'investigate', args: unknown): InvestigateArgs;
export function normalizeToolInput(workflow: 'research', args: unknown): ResearchArgs;
export function normalizeToolInput(workflow: Workflow, args: unknown): ToolArgs;
export function normalizeToolInput(workflow: Workflow, args: unknown): ToolArgs {
  const tool = TOOL_NAMES[workflow];
  const check: Checker = new Checker(tool);
  if (!isRecord(args)) check.fail(`${tool} arguments must be an object`);
  const research = workflow === 'research';
  check.assertKeys(args, research ? RESEARCH_KEYS : INVESTIGATE_KEYS, research ? RESEARCH_REQUIRED : INVESTIGATE_REQUIRED, tool);
  const base: InvestigateArgs = {
    objective: check.nonBlankString(args.objective, 'objective'),
    background: check.stringArray(args.background, 'background'),
    deliverable: check.nonBlankString(args.deliverable, 'deliverable'),
    scope: check.optionalStringArray(args, 'scope'),
    constraints: check.optionalStringArray(args, 'constraints'),
  };
  if (!research) return base;
  return { ...base, sources: normalizeSources(check, args.sources) };
}
