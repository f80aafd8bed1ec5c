/**
 * The model roster configuration (closed zod schemas, no I/O): which model serves each stage,
 * as a `PROVIDER:MODEL[@BASE_URL]` spec string or a full model config object.
 *
 *   { "candidates": [M, M, M] | M,   // one model = self-fusion (three independent runs of it)
 *     "evaluator": M, "merger": M,
 *     "budgets": { "candidate"?: N, "evaluator"?: N, "repair"?: N, "merger"?: N } }  // optional, tokens
 *
 * Credentials are never written here: only the NAME of an environment variable (`apiKeyEnv`) or
 * the path of a 0600 key file (`apiKeyFile`). Prices are per token, in whatever currency the
 * admin uses (USD by convention).
 */
import { z, type ZodError } from 'zod';

export const MODEL_PROVIDERS = ['openai', 'anthropic', 'builtin'] as const;
export type ModelProviderName = (typeof MODEL_PROVIDERS)[number];
export type RemoteProviderName = Exclude<ModelProviderName, 'builtin'>;

export const DEFAULT_BASE_URLS: Readonly<Record<RemoteProviderName, string>> = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com',
};

export const DEFAULT_API_KEY_ENV: Readonly<Record<RemoteProviderName, string>> = {
  openai: 'OPENAI_API_KEY',
  anthropic: 'ANTHROPIC_API_KEY',
};

export const MODEL_DEFAULTS = {
  /** One deadline over every attempt and wait of one model turn. */
  timeoutMs: 600_000,
  maxAttempts: 4,
  /** The Messages API requires max_tokens; OpenAI-compatible requests omit it when unset. */
  anthropicMaxOutputTokens: 8192,
} as const;

/** Environment variable names only: a key itself in the config file would be a leak. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Catches the common slip of writing a per-million price where a per-token one belongs. */
const PER_TOKEN = 'is a price per token (e.g. 0.000003), not per million tokens';

export const ModelConfigObjectSchema = z
  .object({
    provider: z.enum(MODEL_PROVIDERS),
    model: z.string().trim().min(1, 'must not be blank'),
    baseUrl: z.string().trim().min(1, 'must not be blank').optional(),
    apiKeyEnv: z.string().trim().regex(ENV_NAME, 'must be an environment variable name').optional(),
    apiKeyFile: z.string().trim().min(1, 'must not be blank').optional(),
    timeoutMs: z.number().int().min(100).max(3_600_000).optional(),
    maxOutputTokens: z.number().int().min(1).max(1_000_000).optional(),
    pricePerInputToken: z.number().min(0).max(1, PER_TOKEN).optional(),
    pricePerOutputToken: z.number().min(0).max(1, PER_TOKEN).optional(),
    maxAttempts: z.number().int().min(1).max(10).optional(),
    /** The model's context window in tokens: the prompt budgets of the stages it serves derive from it. */
    contextWindowTokens: z.number().int().min(1_000).max(100_000_000).optional(),
  })
  .strict()
  .superRefine((value, ctx) => {
    if (value.apiKeyEnv !== undefined && value.apiKeyFile !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['apiKeyFile'], message: 'set apiKeyEnv or apiKeyFile, not both' });
    }
    if (value.provider === 'builtin') {
      for (const key of ['baseUrl', 'apiKeyEnv', 'apiKeyFile'] as const) {
        if (value[key] !== undefined) ctx.addIssue({ code: 'custom', path: [key], message: 'builtin models take no ' + key });
      }
    }
  });

export const ModelConfigEntrySchema = z.union([z.string().trim().min(1, 'must not be blank'), ModelConfigObjectSchema]);

const budgetTokens = z.number().int().min(1_000, 'must be at least 1000 tokens').max(100_000_000);

export const StageBudgetsSchema = z
  .object({ candidate: budgetTokens.optional(), evaluator: budgetTokens.optional(), repair: budgetTokens.optional(), merger: budgetTokens.optional() })
  .strict();

export const RosterConfigSchema = z
  .object({
    candidates: z.union([ModelConfigEntrySchema, z.array(ModelConfigEntrySchema)]).superRefine((value, ctx) => {
      if (Array.isArray(value) && value.length !== 1 && value.length !== 3) {
        ctx.addIssue({ code: 'custom', message: `must be one model (self-fusion) or exactly three, got ${value.length}` });
      }
    }),
    evaluator: ModelConfigEntrySchema,
    merger: ModelConfigEntrySchema,
    /** Prompt budget per stage in tokens; wins over a budget derived from a context window. */
    budgets: StageBudgetsSchema.optional(),
  })
  .strict();

/** Per-task model overrides (task options `models`, CLI `--candidate-model` …): spec strings. */
export const ModelOverridesSchema = z
  .object({
    candidate: z
      .array(z.string().trim().min(1, 'must not be blank'))
      .refine((a) => a.length === 1 || a.length === 3, 'must name one model (self-fusion) or exactly three')
      .optional(),
    evaluator: z.string().trim().min(1, 'must not be blank').optional(),
    merger: z.string().trim().min(1, 'must not be blank').optional(),
  })
  .strict();

export type ModelConfigObject = z.infer<typeof ModelConfigObjectSchema>;
export type ModelConfigEntry = z.infer<typeof ModelConfigEntrySchema>;
export type RosterConfig = z.infer<typeof RosterConfigSchema>;
export type StageBudgets = z.infer<typeof StageBudgetsSchema>;
export type ModelOverrides = z.infer<typeof ModelOverridesSchema>;

export interface ModelPrices {
  pricePerInputToken?: number;
  pricePerOutputToken?: number;
}

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

/** Cost of one usage record; `null` when no price is configured (unknown is not free). */
export function costOf(usage: TokenUsage, prices: ModelPrices): number | null {
  if (prices.pricePerInputToken === undefined && prices.pricePerOutputToken === undefined) return null;
  return usage.inputTokens * (prices.pricePerInputToken ?? 0) + usage.outputTokens * (prices.pricePerOutputToken ?? 0);
}

type Issue = ZodError['issues'][number];

/** A union branch that failed only because the value had another type (not the one meant). */
function isTypeMismatch(branch: readonly Issue[]): boolean {
  if (branch.length !== 1 || branch[0]!.path.length !== 0) return false;
  const only = branch[0]!;
  if (only.code === 'invalid_type') return true;
  return only.code === 'invalid_union' && only.errors.every(isTypeMismatch);
}

function isMissing(issue: Issue): boolean {
  if (issue.code === 'invalid_type') return issue.input === undefined && /received undefined/.test(issue.message);
  return issue.code === 'invalid_union' && issue.errors.every((b) => b.length === 1 && isMissing(b[0]!));
}

function flatten(issue: Issue, prefix: readonly PropertyKey[], out: string[]): void {
  const path = [...prefix, ...issue.path];
  if (isMissing(issue)) {
    out.push(`${label(path)}: is required`);
    return;
  }
  if (issue.code === 'invalid_union') {
    // Report the branch the value was meant for (the one that is not a bare type mismatch),
    // so an object with a typo says "unknown key", not "expected string".
    const meant = issue.errors.filter((b) => !isTypeMismatch(b));
    if (meant.length > 0) {
      for (const inner of meant[0]!) flatten(inner, path, out);
      return;
    }
    out.push(`${label(path)}: must be a PROVIDER:MODEL spec string or a model config object${path[0] === 'candidates' && path.length === 1 ? ' (or an array of them)' : ''}`);
    return;
  }
  if (issue.code === 'unrecognized_keys') {
    out.push(`${label(path)}: unknown key(s) ${issue.keys.join(', ')}`);
    return;
  }
  out.push(`${label(path)}: ${issue.message}`);
}

function label(path: readonly PropertyKey[]): string {
  return path.length === 0 ? '(root)' : path.map((p) => String(p)).join('.');
}

/** Every issue as `path: message`, unions resolved to the branch the value was meant for. */
export function describeModelConfigIssues(error: ZodError, prefix: readonly PropertyKey[] = []): string[] {
  const out: string[] = [];
  for (const issue of error.issues) flatten(issue, prefix, out);
  return out;
}
