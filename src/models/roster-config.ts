/**
 * Loads the model roster: which provider serves each candidate slot, the evaluator and the
 * merger. Sources, in order: the models file (`file` option, else `FUSION_MODELS_FILE`), else the
 * builtin engine (candidates content-search, path-search, definition-search; builtin evaluator
 * and merger). Per-task overrides (spec strings) apply on top.
 *
 * Load is fatal on any problem (`invalid_config`, every issue with its path), and checks
 * credentials up front: a remote model whose key is missing fails at start-up naming the
 * variable or file, not at the first model call.
 *
 * Security decision — keys are bound to endpoints. A per-task override is less trusted than the
 * admin's models file (an agent that submits tasks may be steered by what it read), so an
 * untrusted override may only name an endpoint the daemon already knows: the provider's
 * default endpoint or a base URL configured in the models file. Otherwise a task could send
 * `openai:x@https://attacker.example/v1` and receive the daemon's OPENAI_API_KEY in a header,
 * or make the daemon POST to arbitrary local ports. Trusted overrides (the admin's own CLI,
 * `fusion models check --candidate-model …`) are resolved like the models file.
 */
import { readFileSync } from 'node:fs';
import {
  DEFAULT_API_KEY_ENV,
  DEFAULT_BASE_URLS,
  MODEL_DEFAULTS,
  RosterConfigSchema,
  describeModelConfigIssues,
  type ModelConfigEntry,
  type ModelPrices,
  type ModelProviderName,
  type RemoteProviderName,
  type StageBudgets,
} from '../contracts/model-config.js';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import { BUDGET_STAGES, DEFAULT_BUDGET_CONFIG, budgetSetting, type BudgetConfig, type BudgetStage } from '../contracts/budget.js';
import { fixedRoster, type Roster } from './roster.js';
import { createAnthropicProvider } from './anthropic.js';
import { createBuiltinProvider, type BuiltinStrategy } from './builtin/index.js';
import { credentialFromEnv, credentialFromFile, type Credential } from './credentials.js';
import { makeConfiguredProvider, type ConfiguredProvider, type ProviderDescription, type RetryPolicy } from './remote-provider.js';
import { checkBaseUrl, checkBuiltinModel, isLocalEndpoint, parseModelSpec } from './model-spec.js';
import { createOpenAIProvider } from './openai.js';
import type { ModelProvider } from './port.js';

export { costOf } from '../contracts/model-config.js';

export type Env = Record<string, string | undefined>;


export interface RosterOverrides {
  /** One spec (self-fusion: all three slots) or exactly three. */
  candidate?: string[];
  evaluator?: string;
  merger?: string;
}

/** A model entry after validation, with defaults applied (no credential yet). */
export interface ResolvedModel {
  provider: ModelProviderName;
  model: string;
  /** Remote providers only. */
  baseUrl?: string;
  apiKeyEnv?: string;
  apiKeyFile?: string;
  timeoutMs: number;
  maxAttempts: number;
  maxOutputTokens?: number;
  contextWindowTokens?: number;
  prices: ModelPrices;
}

export interface RosterDescription {
  source: string;
  selfFusion: boolean;
  candidates: ProviderDescription[];
  evaluator: ProviderDescription;
  merger: ProviderDescription;
}

export interface LoadedRoster {
  roster: Roster;
  /** Prompt budgets per stage for tasks served by this roster, each naming its setting. */
  budget: BudgetConfig;
  /** Per-role descriptions, safe to log and show (no key, only where it comes from). */
  describe(): RosterDescription;
}

export interface RosterSource {
  /** The configured roster, without overrides. */
  describe(): RosterDescription;
  /** Builds a roster; throws invalid_input for a bad or disallowed override. */
  build(overrides?: RosterOverrides, options?: { trusted?: boolean }): LoadedRoster;
}

export interface LoadRosterConfigOptions {
  file?: string;
  env: Env;
  log: Logger;
  /**
   * The admin's own overrides (daemon or CLI flags such as `--candidate-model`): applied to the
   * configured roster like models-file entries (any endpoint; missing key → invalid_config),
   * and their endpoints become known endpoints for per-task overrides.
   */
  adminOverrides?: RosterOverrides;
  /** Backoff tuning for the remote providers (tests). */
  retry?: Partial<RetryPolicy>;
}

export interface LoadRosterOptions extends Omit<LoadRosterConfigOptions, 'adminOverrides'> {
  overrides?: RosterOverrides;
  /** Overrides come from the admin (CLI flags) rather than a task: resolve like the models file. */
  trustOverrides?: boolean;
}

type Roles = { candidates: [ResolvedModel, ResolvedModel, ResolvedModel]; evaluator: ResolvedModel; merger: ResolvedModel; budgets?: StageBudgets };

/** Output tokens kept free in a context window when no maxOutputTokens is configured. */
const DEFAULT_OUTPUT_RESERVE_TOKENS = MODEL_DEFAULTS.anthropicMaxOutputTokens;

/**
 * Each stage's prompt budget: the models file's `budgets.<stage>`, else the smallest context
 * window of the models serving it (minus their output reservation), else the default. Each
 * comes with the setting that changes it, which every budget error names.
 */
export function stageBudgets(models: { candidates: readonly ResolvedModel[]; evaluator: ResolvedModel; merger: ResolvedModel }, budgets: StageBudgets | undefined): BudgetConfig {
  const serving: Record<BudgetStage, { models: readonly ResolvedModel[]; label: string }> = {
    candidate: { models: models.candidates, label: 'the candidate models' },
    evaluator: { models: [models.evaluator], label: 'the evaluator model' },
    repair: { models: [models.evaluator], label: 'the evaluator model' },
    merger: { models: [models.merger], label: 'the merger model' },
  };
  const stageBudgetTokens = { ...DEFAULT_BUDGET_CONFIG.stageBudgetTokens };
  const settings: Partial<Record<BudgetStage, string>> = {};
  for (const stage of BUDGET_STAGES) {
    const explicit = budgets?.[stage];
    const windows = serving[stage].models.filter((m) => m.contextWindowTokens !== undefined).map((m) => (m.contextWindowTokens as number) - (m.maxOutputTokens ?? DEFAULT_OUTPUT_RESERVE_TOKENS));
    if (explicit !== undefined) {
      stageBudgetTokens[stage] = explicit;
      settings[stage] = `"budgets.${stage}" in the models file (now ${explicit} tokens)`;
    } else if (windows.length > 0) {
      stageBudgetTokens[stage] = Math.max(1_000, Math.min(...windows));
      settings[stage] = `"budgets.${stage}" in the models file, or a larger "contextWindowTokens" of ${serving[stage].label} (the budget now derives from it)`;
    } else {
      settings[stage] = budgetSetting(stage);
    }
  }
  return { ...DEFAULT_BUDGET_CONFIG, stageBudgetTokens, settings };
}

const BUILTIN_DEFAULT: Roles = (() => {
  const b = (model: BuiltinStrategy): ResolvedModel => ({ provider: 'builtin', model, timeoutMs: MODEL_DEFAULTS.timeoutMs, maxAttempts: 1, prices: {} });
  return { candidates: [b('content-search'), b('path-search'), b('definition-search')], evaluator: b('content-search'), merger: b('content-search') };
})();

function resolveEntry(entry: ModelConfigEntry, path: string, issues: string[]): ResolvedModel | undefined {
  const base = { timeoutMs: MODEL_DEFAULTS.timeoutMs, maxAttempts: MODEL_DEFAULTS.maxAttempts, prices: {} };
  if (typeof entry === 'string') {
    try {
      const spec = parseModelSpec(entry);
      if (spec.provider === 'builtin') return { ...base, provider: 'builtin', model: spec.model, maxAttempts: 1 };
      return { ...base, provider: spec.provider, model: spec.model, baseUrl: spec.baseUrl ?? DEFAULT_BASE_URLS[spec.provider] };
    } catch (err) {
      issues.push(`${path}: ${(err as Error).message}`);
      return undefined;
    }
  }
  const prices: ModelPrices = {
    ...(entry.pricePerInputToken === undefined ? {} : { pricePerInputToken: entry.pricePerInputToken }),
    ...(entry.pricePerOutputToken === undefined ? {} : { pricePerOutputToken: entry.pricePerOutputToken }),
  };
  const common = {
    model: entry.model,
    timeoutMs: entry.timeoutMs ?? MODEL_DEFAULTS.timeoutMs,
    maxAttempts: entry.maxAttempts ?? MODEL_DEFAULTS.maxAttempts,
    ...(entry.maxOutputTokens === undefined ? {} : { maxOutputTokens: entry.maxOutputTokens }),
    ...(entry.contextWindowTokens === undefined ? {} : { contextWindowTokens: entry.contextWindowTokens }),
    prices,
  };
  if (entry.provider === 'builtin') {
    try {
      checkBuiltinModel(entry.model, (problem) => new Error(problem));
    } catch (err) {
      issues.push(`${path}.model: ${(err as Error).message}`);
      return undefined;
    }
    return { ...common, provider: 'builtin' };
  }
  let baseUrl = DEFAULT_BASE_URLS[entry.provider];
  if (entry.baseUrl !== undefined) {
    const checked = checkBaseUrl(entry.baseUrl);
    if (!checked.ok) {
      issues.push(`${path}.baseUrl: ${checked.problem}`);
      return undefined;
    }
    baseUrl = checked.url;
  }
  return {
    ...common,
    provider: entry.provider,
    baseUrl,
    ...(entry.apiKeyEnv === undefined ? {} : { apiKeyEnv: entry.apiKeyEnv }),
    ...(entry.apiKeyFile === undefined ? {} : { apiKeyFile: entry.apiKeyFile }),
  };
}

/**
 * The credential of a remote model. Explicit `apiKeyEnv`/`apiKeyFile` must resolve; otherwise the
 * provider's default variable is used when set, and required unless the endpoint is local.
 */
function resolveCredential(m: ResolvedModel, env: Env): Credential | undefined {
  if (m.provider === 'builtin') return undefined;
  if (m.apiKeyFile !== undefined) return credentialFromFile(m.apiKeyFile);
  const name = m.apiKeyEnv ?? DEFAULT_API_KEY_ENV[m.provider];
  const credential = credentialFromEnv(name, env);
  if (credential !== undefined) return credential;
  if (m.apiKeyEnv === undefined && isLocalEndpoint(m.baseUrl!)) return undefined;
  throw new FusionError('invalid_config', `${m.provider}:${m.model} at ${m.baseUrl!} needs an API key: set the environment variable ${name}`, {
    details: { provider: m.provider, model: m.model, variable: name },
  });
}

function builtinProvider(m: ResolvedModel): ConfiguredProvider {
  const inner = createBuiltinProvider(m.model as BuiltinStrategy);
  return makeConfiguredProvider({ id: inner.id, engine: inner.engine, model: m.model, prices: m.prices }, (req) => inner.complete(req));
}

function createProvider(m: ResolvedModel, credential: Credential | undefined, log: Logger, retry: Partial<RetryPolicy> | undefined): ConfiguredProvider {
  if (m.provider === 'builtin') return builtinProvider(m);
  const settings = {
    model: m.model,
    baseUrl: m.baseUrl!,
    timeoutMs: m.timeoutMs,
    maxAttempts: m.maxAttempts,
    ...(m.maxOutputTokens === undefined ? {} : { maxOutputTokens: m.maxOutputTokens }),
    prices: m.prices,
    ...(retry === undefined ? {} : { retry }),
  };
  return m.provider === 'openai' ? createOpenAIProvider(settings, credential, log) : createAnthropicProvider(settings, credential, log);
}

function readModelsFile(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new FusionError('invalid_config', `models file ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { details: { file } });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new FusionError('invalid_config', `models file ${file} is not valid JSON: ${(err as Error).message}`, { details: { file } });
  }
}

function parseRosterFile(file: string): Roles {
  const parsed = RosterConfigSchema.safeParse(readModelsFile(file));
  const fail = (issues: string[]): FusionError =>
    new FusionError('invalid_config', `models file ${file} is invalid: ${issues.join('; ')}`, { details: { file, issues } });
  if (!parsed.success) throw fail(describeModelConfigIssues(parsed.error));
  const issues: string[] = [];
  const raw = parsed.data.candidates;
  const list = Array.isArray(raw) ? raw : [raw];
  const cands = list.map((e, i) => resolveEntry(e, Array.isArray(raw) ? `candidates.${i}` : 'candidates', issues));
  const evaluator = resolveEntry(parsed.data.evaluator, 'evaluator', issues);
  const merger = resolveEntry(parsed.data.merger, 'merger', issues);
  if (issues.length > 0) throw fail(issues);
  const c = cands as ResolvedModel[];
  const three: Roles['candidates'] = c.length === 1 ? [c[0]!, c[0]!, c[0]!] : [c[0]!, c[1]!, c[2]!];
  return { candidates: three, evaluator: evaluator!, merger: merger!, ...(parsed.data.budgets === undefined ? {} : { budgets: parsed.data.budgets }) };
}

function checkCandidateCount(cand: readonly string[] | undefined): void {
  if (cand !== undefined && cand.length !== 1 && cand.length !== 3) {
    throw new FusionError('invalid_input', `candidate model overrides must name one model (self-fusion) or exactly three, got ${cand.length}`);
  }
}

/** Admin overrides replace roles like models-file entries; bad specs are invalid_input. */
function applyAdminOverrides(roles: Roles, overrides: RosterOverrides | undefined): Roles {
  if (overrides === undefined) return roles;
  checkCandidateCount(overrides.candidate);
  const issues: string[] = [];
  const one = (spec: string | undefined, path: string, current: ResolvedModel): ResolvedModel => (spec === undefined ? current : (resolveEntry(spec, path, issues) ?? current));
  const cand = overrides.candidate;
  let candidates = roles.candidates;
  if (cand !== undefined && cand.length === 1) {
    const m = one(cand[0], 'candidate model', roles.candidates[0]);
    candidates = [m, m, m];
  } else if (cand !== undefined) {
    candidates = [one(cand[0], 'candidate model 1', roles.candidates[0]), one(cand[1], 'candidate model 2', roles.candidates[1]), one(cand[2], 'candidate model 3', roles.candidates[2])];
  }
  const result: Roles = {
    candidates,
    evaluator: one(overrides.evaluator, 'evaluator model', roles.evaluator),
    merger: one(overrides.merger, 'merger model', roles.merger),
    ...(roles.budgets === undefined ? {} : { budgets: roles.budgets }),
  };
  if (issues.length > 0) throw new FusionError('invalid_input', issues.join('; '), { details: { issues } });
  return result;
}

const sameEndpoint = (a: ResolvedModel, b: ResolvedModel): boolean => a.provider === b.provider && a.baseUrl === b.baseUrl;

export function loadRosterConfig(options: LoadRosterConfigOptions): RosterSource {
  const envFile = options.env.FUSION_MODELS_FILE?.trim();
  const file = options.file ?? (envFile === '' ? undefined : envFile);
  const fileSource = options.file !== undefined ? `file ${file}` : file !== undefined ? `env FUSION_MODELS_FILE (${file})` : 'default (builtin engine)';
  const roles = applyAdminOverrides(file === undefined ? BUILTIN_DEFAULT : parseRosterFile(file), options.adminOverrides);
  const admin = options.adminOverrides;
  const source = admin !== undefined && Object.values(admin).some((v) => v !== undefined) ? `${fileSource} + admin overrides` : fileSource;
  const configured = [...roles.candidates, roles.evaluator, roles.merger];

  // Credentials now, so a missing key is fatal at start-up; every problem reported at once.
  const credentials = new Map<ResolvedModel, Credential | undefined>();
  const problems: string[] = [];
  for (const m of new Set(configured)) {
    try {
      credentials.set(m, resolveCredential(m, options.env));
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  if (problems.length > 0) {
    throw new FusionError('invalid_config', [...new Set(problems)].join('; '), { details: { source, issues: [...new Set(problems)] } });
  }

  const resolveOverride = (spec: string, path: string, trusted: boolean): { model: ResolvedModel; credential: Credential | undefined } => {
    const issues: string[] = [];
    const parsed = resolveEntry(spec, path, issues);
    if (parsed === undefined) throw new FusionError('invalid_input', issues.join('; '), { details: { override: path } });
    if (parsed.provider === 'builtin') return { model: parsed, credential: undefined };
    // Same endpoint as a configured model: reuse its key and transport settings (and its
    // prices and output cap when it is the same model).
    const known = configured.find((m) => sameEndpoint(m, parsed) && m.model === parsed.model) ?? configured.find((m) => sameEndpoint(m, parsed));
    if (known !== undefined) {
      const { maxOutputTokens: _modelSpecific, ...transport } = known;
      const merged: ResolvedModel = known.model === parsed.model ? known : { ...transport, model: parsed.model, prices: {} };
      return { model: merged, credential: credentials.get(known) };
    }
    const isDefault = parsed.baseUrl === DEFAULT_BASE_URLS[parsed.provider as RemoteProviderName];
    if (!trusted && !isDefault) {
      throw new FusionError(
        'invalid_input',
        `${path}: base URL ${parsed.baseUrl!} is not an endpoint this daemon is configured for; per-task overrides may only use the provider's default endpoint or a base URL listed in the models file`,
        { details: { override: path } },
      );
    }
    try {
      return { model: parsed, credential: resolveCredential(parsed, options.env) };
    } catch (err) {
      if (trusted || !(err instanceof FusionError)) throw err;
      throw new FusionError('invalid_input', `${path}: ${err.message}`, { details: { override: path } });
    }
  };

  const provider = (m: ResolvedModel, credential: Credential | undefined): ConfiguredProvider => createProvider(m, credential, options.log, options.retry);

  const assemble = (slots: Array<{ model: ResolvedModel; credential: Credential | undefined }>, selfFusion: boolean, label: string): LoadedRoster => {
    const built = slots.map((s) => provider(s.model, s.credential));
    const budget = stageBudgets({ candidates: slots.slice(0, 3).map((s) => s.model), evaluator: slots[3]!.model, merger: slots[4]!.model }, roles.budgets);
    const [c1, c2, c3, ev, mg] = built as [ConfiguredProvider, ConfiguredProvider, ConfiguredProvider, ConfiguredProvider, ConfiguredProvider];
    const roster = Object.freeze(fixedRoster([c1, c2, c3], ev, mg));
    const description: RosterDescription = {
      source: label,
      selfFusion,
      candidates: [c1.describe(), c2.describe(), c3.describe()],
      evaluator: ev.describe(),
      merger: mg.describe(),
    };
    return { roster, budget, describe: () => structuredClone(description) };
  };

  const isSelf = (c: Roles['candidates']): boolean => c[0] === c[1] && c[1] === c[2];
  const withCred = (m: ResolvedModel): { model: ResolvedModel; credential: Credential | undefined } => ({ model: m, credential: credentials.get(m) });
  const base = assemble([...roles.candidates.map(withCred), withCred(roles.evaluator), withCred(roles.merger)], isSelf(roles.candidates), source);
  options.log.info({ roster: base.describe() }, 'model roster loaded');

  return {
    describe: base.describe,
    build(overrides = {}, buildOptions = {}) {
      const trusted = buildOptions.trusted ?? false;
      if (overrides.candidate === undefined && overrides.evaluator === undefined && overrides.merger === undefined) return base;
      const cand = overrides.candidate;
      checkCandidateCount(cand);
      const candSlots =
        cand === undefined
          ? roles.candidates.map(withCred)
          : cand.length === 1
            ? Array.from({ length: 3 }, () => resolveOverride(cand[0]!, 'candidate model', trusted))
            : cand.map((s, i) => resolveOverride(s, `candidate model ${i + 1}`, trusted));
      const ev = overrides.evaluator === undefined ? withCred(roles.evaluator) : resolveOverride(overrides.evaluator, 'evaluator model', trusted);
      const mg = overrides.merger === undefined ? withCred(roles.merger) : resolveOverride(overrides.merger, 'merger model', trusted);
      const self = cand === undefined ? isSelf(roles.candidates) : cand.length === 1;
      return assemble([...candSlots, ev, mg], self, `${source} + overrides`);
    },
  };
}

/** Loads the configured roster and applies `overrides` (untrusted unless `trustOverrides`). */
export function loadRoster(options: LoadRosterOptions): LoadedRoster {
  const { overrides, trustOverrides, ...rest } = options;
  if (trustOverrides === true) return loadRosterConfig({ ...rest, ...(overrides === undefined ? {} : { adminOverrides: overrides }) }).build();
  return loadRosterConfig(rest).build(overrides);
}

/** Prices of a provider built here (`{}` for any other ModelProvider). */
export function providerPrices(provider: ModelProvider): ModelPrices {
  const prices = (provider as Partial<ConfiguredProvider>).prices;
  return prices === undefined ? {} : { ...prices };
}
