/**
 * Canonical JSON, hashes and the canonical Fusion input (docs/behaviour.md#a6 (and #a7)), plus the research source
 * policy derived from it. Pure: node:crypto and zod only.
 *
 * The canonical input is built only from normalised tool arguments and the repository path, so
 * nothing from the caller's session (history, environment, other tools) can leak into it.
 */
import { z } from 'zod';
import { FusionError } from '../errors.js';
import { CLEAN_TASK_POLICY_ID, SCHEMA, TOOL_NAMES, WORKFLOWS, type Workflow } from './constants.js';
import { InvestigateArgsSchema, ResearchArgsSchema, type InvestigateArgs, type ResearchArgs, type ResearchSource } from './tool-input.js';
import { sha256Hex } from './sha256.js';

/** Re-exported: code written before contracts/sha256.ts imports it from here. */
export { sha256Hex };

/**
 * JSON with object keys sorted recursively (UTF-16 code unit order), arrays in order, no
 * whitespace. Follows JSON.stringify for `toJSON` and for undefined/function values (omitted in
 * objects, null in arrays), but refuses values whose JSON form would silently lose data or be
 * ambiguous: non-finite numbers, bigint, Map/Set, cycles, and an undefined top level.
 */
export function canonicalJson(value: unknown): string {
  const text = encode(value, new Set<object>());
  if (text === undefined) throw new TypeError('canonicalJson: top-level value is not JSON-serialisable');
  return text;
}

function encode(input: unknown, stack: Set<object>): string | undefined {
  let value = input;
  if (typeof value === 'object' && value !== null && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    value = (value as { toJSON: () => unknown }).toJSON();
  }
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`canonicalJson: non-finite number ${String(value)}`);
      return JSON.stringify(value);
    case 'bigint':
      throw new TypeError('canonicalJson: bigint is not JSON');
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
    default:
      break;
  }
  const object = value as object;
  if (object instanceof Map || object instanceof Set) throw new TypeError('canonicalJson: Map/Set is not JSON');
  if (stack.has(object)) throw new TypeError('canonicalJson: cyclic structure');
  stack.add(object);
  try {
    if (Array.isArray(object)) {
      return `[${object.map((item: unknown) => encode(item, stack) ?? 'null').join(',')}]`;
    }
    const record = object as Record<string, unknown>;
    const parts: string[] = [];
    for (const key of Object.keys(record).sort()) {
      const encoded = encode(record[key], stack);
      if (encoded !== undefined) parts.push(`${JSON.stringify(key)}:${encoded}`);
    }
    return `{${parts.join(',')}}`;
  } finally {
    stack.delete(object);
  }
}

/** docs/behaviour.md#a6: the normalised arguments as canonical JSON. Same request → byte-identical text. */
export function canonicalRequestText(args: InvestigateArgs | ResearchArgs): string {
  return canonicalJson(args);
}

/** Hash of one declared source: sha256(canonical_url + "\0" + purpose). */
export function declaredSourceSha256(canonicalUrl: string, purpose: string): string {
  return sha256Hex(`${canonicalUrl}\u0000${purpose}`);
}

const Sha256HexString = z.string().regex(/^[0-9a-f]{64}$/u);

export const DeclaredSourceSchema = z
  .object({
    url: z.string().min(1),
    canonical_url: z.string().min(1),
    purpose: z.string().min(1),
    sha256: Sha256HexString,
  })
  .strict()
  .refine((source) => source.sha256 === declaredSourceSha256(source.canonical_url, source.purpose), {
    message: 'sha256 must equal sha256(canonical_url + "\\0" + purpose)',
    path: ['sha256'],
  });

export const CanonicalInputSchema = z
  .object({
    schema_version: z.literal(SCHEMA.fusionInput),
    workflow: z.enum(WORKFLOWS),
    cwd: z.string().min(1),
    request: z
      .object({
        source: z.enum([TOOL_NAMES.investigate, TOOL_NAMES.research]),
        authority: z.literal('explicit_text'),
        text: z.string().min(1),
        sha256: Sha256HexString,
      })
      .strict(),
    context: z
      .object({
        kind: z.literal('clean_task'),
        policy_id: z.literal(CLEAN_TASK_POLICY_ID),
        declared_sources: z.array(DeclaredSourceSchema),
      })
      .strict(),
  })
  .strict()
  .superRefine((input, ctx) => {
    if (input.request.source !== TOOL_NAMES[input.workflow]) {
      ctx.addIssue({ code: 'custom', path: ['request', 'source'], message: `must be ${TOOL_NAMES[input.workflow]}` });
    }
    if (input.request.sha256 !== sha256Hex(input.request.text)) {
      ctx.addIssue({ code: 'custom', path: ['request', 'sha256'], message: 'must be the SHA-256 of request.text' });
    }
    if (input.workflow === 'investigate' && input.context.declared_sources.length > 0) {
      ctx.addIssue({ code: 'custom', path: ['context', 'declared_sources'], message: 'must be empty for investigate' });
    }
    if (input.workflow === 'research' && input.context.declared_sources.length === 0) {
      ctx.addIssue({ code: 'custom', path: ['context', 'declared_sources'], message: 'must not be empty for research' });
    }
  });

export type DeclaredSource = z.infer<typeof DeclaredSourceSchema>;
export type CanonicalInput = z.infer<typeof CanonicalInputSchema>;

export interface BuildCanonicalInputOptions {
  workflow: Workflow;
  /** Absolute repository path the task runs against. */
  cwd: string;
  /** Output of normalizeToolInput for the same workflow. */
  args: InvestigateArgs | ResearchArgs;
}

function notNormalised(tool: string, error: z.ZodError): never {
  const issues = error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`).join('; ');
  throw new FusionError('invalid_input', `${tool} arguments are not normalised: ${issues}`, { details: { tool } });
}

/**
 * docs/behaviour.md#a7. `args` must already be normalised; it is re-checked against the closed schema so a
 * wider object (extra keys from a session) cannot reach the canonical text.
 *
 * Declared source `url`: the normalised arguments store only the canonical URL (docs/behaviour.md#a5), so
 * `url` and `canonical_url` are both the canonical form, as in the original implementation,
 * whose source-policy parser requires `url === canonical_url`. The caller's raw spelling is not
 * threaded through: the fetch tool must match the canonical URL exactly anyway (docs/behaviour.md#e2).
 */
export function buildCanonicalInput(options: BuildCanonicalInputOptions): CanonicalInput {
  const { workflow, cwd } = options;
  const tool = TOOL_NAMES[workflow];
  if (typeof cwd !== 'string' || cwd.length === 0) {
    throw new FusionError('invalid_input', 'canonical input cwd must be a non-empty string', { details: { tool, path: 'cwd' } });
  }
  let args: InvestigateArgs | ResearchArgs;
  let declared: readonly ResearchSource[] = [];
  if (workflow === 'research') {
    const research = ResearchArgsSchema.safeParse(options.args);
    if (!research.success) notNormalised(tool, research.error);
    args = research.data;
    declared = research.data.sources;
  } else {
    const investigate = InvestigateArgsSchema.safeParse(options.args);
    if (!investigate.success) notNormalised(tool, investigate.error);
    args = investigate.data;
  }
  const text = canonicalRequestText(args);
  return {
    schema_version: SCHEMA.fusionInput,
    workflow,
    cwd,
    request: { source: tool, authority: 'explicit_text', text, sha256: sha256Hex(text) },
    context: {
      kind: 'clean_task',
      policy_id: CLEAN_TASK_POLICY_ID,
      declared_sources: declared.map((source) => ({
        url: source.url,
        canonical_url: source.url,
        purpose: source.purpose,
        sha256: declaredSourceSha256(source.url, source.purpose),
      })),
    },
  };
}

export const SourcePolicySchema = z
  .object({
    schema_version: z.literal(SCHEMA.sourcePolicy),
    sources: z
      .array(
        z
          .object({ canonical_url: z.string().min(1), purpose: z.string().min(1), sha256: Sha256HexString })
          .strict(),
      ),
    root_sha256: Sha256HexString,
  })
  .strict();

export type SourcePolicy = z.infer<typeof SourcePolicySchema>;

/** root_sha256 = sha256(canonicalJson(sorted list of the source hashes)): order-independent. */
export function sourcePolicyRootSha256(sourceHashes: readonly string[]): string {
  return sha256Hex(canonicalJson([...sourceHashes].sort()));
}

/** The research source policy the broker enforces (what fusion_web_fetch may fetch). */
export function sourcePolicy(canonicalInput: CanonicalInput): SourcePolicy {
  const sources = canonicalInput.context.declared_sources.map((source) => ({
    canonical_url: source.canonical_url,
    purpose: source.purpose,
    sha256: source.sha256,
  }));
  return {
    schema_version: SCHEMA.sourcePolicy,
    sources,
    root_sha256: sourcePolicyRootSha256(sources.map((source) => source.sha256)),
  };
}
