import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { costOf, ModelOverridesSchema, RosterConfigSchema, describeModelConfigIssues } from '../../../src/contracts/model-config.js';
import { silentLogger } from '../../../src/log.js';
import { loadRoster, loadRosterConfig, providerPrices } from '../../../src/models/roster-config.js';
import { rosterEngines } from '../../../src/models/roster.js';

const KEY = 'sk-SENTINEL-roster-00112233445566778899';
const log = silentLogger();
let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'fusion-roster-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function file(config: unknown, name = 'models.json'): string {
  const path = join(dir, name);
  writeFileSync(path, typeof config === 'string' ? config : JSON.stringify(config));
  return path;
}

function thrown(fn: () => unknown): Error & { code?: string; details?: Record<string, unknown> } {
  try {
    fn();
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('expected a throw');
}

describe('model config schema', () => {
  it('reports every issue with its path, unions resolved to the intended branch', () => {
    const parsed = RosterConfigSchema.safeParse({
      candidates: [{ provider: 'openai', model: ' ', apiKey: 'sk-x' }, 'openai:a', 5],
      evaluator: { provider: 'builtin', model: 'content-search', baseUrl: 'http://x' },
      extra: true,
    });
    expect(parsed.success).toBe(false);
    const issues = describeModelConfigIssues(parsed.error!);
    expect(issues).toEqual(
      expect.arrayContaining([
        'candidates.0.model: must not be blank',
        'candidates.0: unknown key(s) apiKey',
        'candidates.2: must be a PROVIDER:MODEL spec string or a model config object',
        'evaluator.baseUrl: builtin models take no baseUrl',
        'merger: is required',
        '(root): unknown key(s) extra',
      ]),
    );
  });

  it('checks prices are per token and candidate counts', () => {
    const parsed = RosterConfigSchema.safeParse({
      candidates: ['openai:a', 'openai:b'],
      evaluator: { provider: 'openai', model: 'm', pricePerInputToken: 3 },
      merger: 'builtin:content-search',
    });
    const issues = describeModelConfigIssues(parsed.error!);
    expect(issues).toContain('candidates: must be one model (self-fusion) or exactly three, got 2');
    expect(issues).toContain('evaluator.pricePerInputToken: is a price per token (e.g. 0.000003), not per million tokens');
  });

  it('costOf multiplies tokens by per-token prices; unknown prices give null', () => {
    expect(costOf({ inputTokens: 1000, outputTokens: 200 }, { pricePerInputToken: 0.000003, pricePerOutputToken: 0.000015 })).toBeCloseTo(0.006, 10);
    expect(costOf({ inputTokens: 10, outputTokens: 10 }, { pricePerOutputToken: 0.5 })).toBe(5);
    expect(costOf({ inputTokens: 10, outputTokens: 10 }, {})).toBeNull();
  });

  it('override schema accepts one or three candidates', () => {
    expect(ModelOverridesSchema.safeParse({ candidate: ['openai:a'] }).success).toBe(true);
    expect(ModelOverridesSchema.safeParse({ candidate: ['a', 'b'] }).success).toBe(false);
    expect(ModelOverridesSchema.safeParse({ judge: 'x' }).success).toBe(false);
  });
});

describe('loadRoster', () => {
  it('defaults to the builtin engine when nothing is configured', () => {
    const { roster, describe: d } = loadRoster({ env: {}, log });
    expect(roster.candidate(1).id).toBe('builtin:content-search');
    expect(roster.candidate(2).id).toBe('builtin:path-search');
    expect(roster.candidate(3).id).toBe('builtin:definition-search');
    expect(roster.evaluator().engine).toBe('builtin');
    expect(rosterEngines(roster)).toEqual(['builtin']);
    expect(d()).toMatchObject({ source: 'default (builtin engine)', selfFusion: false });
    expect(Object.isFrozen(roster)).toBe(true);
  });

  it('loads a file: self-fusion, spec strings and objects, prices, key sources; no key in the description', () => {
    const keyFile = join(dir, 'anthropic.key');
    writeFileSync(keyFile, KEY, { mode: 0o600 });
    const path = file({
      candidates: { provider: 'openai', model: 'gpt-4.1', apiKeyEnv: 'TEAM_OPENAI', pricePerInputToken: 0.000002, pricePerOutputToken: 0.000008, maxOutputTokens: 4000 },
      evaluator: { provider: 'anthropic', model: 'claude-sonnet-4-5', apiKeyFile: keyFile, timeoutMs: 120000, maxAttempts: 2 },
      merger: 'openai:qwen3@http://127.0.0.1:11434/v1',
    });
    const loaded = loadRoster({ file: path, env: { TEAM_OPENAI: KEY }, log });
    const d = loaded.describe();
    expect(d.selfFusion).toBe(true);
    expect(d.candidates[0]).toEqual({
      id: 'openai:gpt-4.1',
      engine: 'openai',
      model: 'gpt-4.1',
      baseUrl: 'https://api.openai.com/v1',
      keySource: 'env TEAM_OPENAI',
      timeoutMs: 600000,
      maxAttempts: 4,
      maxOutputTokens: 4000,
      prices: { pricePerInputToken: 0.000002, pricePerOutputToken: 0.000008 },
    });
    expect(d.evaluator).toMatchObject({ id: 'anthropic:claude-sonnet-4-5', baseUrl: 'https://api.anthropic.com', keySource: `file ${keyFile}`, timeoutMs: 120000, maxAttempts: 2 });
    // A local endpoint needs no key.
    expect(d.merger).toMatchObject({ id: 'openai:qwen3', baseUrl: 'http://127.0.0.1:11434/v1', keySource: null });
    expect(providerPrices(loaded.roster.candidate(2))).toEqual({ pricePerInputToken: 0.000002, pricePerOutputToken: 0.000008 });
    for (const text of [JSON.stringify(d), JSON.stringify(loaded), inspect(loaded, { depth: 20, showHidden: true }), JSON.stringify(loaded.roster.evaluator())]) {
      expect(text).not.toContain(KEY);
    }
    expect(rosterEngines(loaded.roster)).toEqual(['anthropic', 'openai']);
  });

  it('reads FUSION_MODELS_FILE from the given env', () => {
    const path = file({ candidates: ['builtin:path-search', 'builtin:path-search', 'builtin:content-search'], evaluator: 'builtin:content-search', merger: 'builtin:content-search' });
    const d = loadRoster({ env: { FUSION_MODELS_FILE: path }, log }).describe();
    expect(d.source).toBe(`env FUSION_MODELS_FILE (${path})`);
    expect(d.candidates.map((c) => c.id)).toEqual(['builtin:path-search', 'builtin:path-search', 'builtin:content-search']);
  });

  it('is fatal (invalid_config) on an unreadable, non-JSON or invalid file, listing every issue', () => {
    expect(thrown(() => loadRoster({ file: join(dir, 'missing.json'), env: {}, log }))).toMatchObject({ code: 'invalid_config', message: `models file ${join(dir, 'missing.json')} cannot be read: ENOENT` });
    expect(thrown(() => loadRoster({ file: file('{ nope', 'bad.json'), env: {}, log })).message).toMatch(/models file .*bad\.json is not valid JSON/);
    const err = thrown(() =>
      loadRoster({
        file: file({ candidates: ['gemini:x', 'openai:a@ftp://h', { provider: 'openai', model: 'm', baseUrl: 'http://u:p@h/v1' }], evaluator: 'builtin:nope', merger: { provider: 'builtin', model: 'x' } }),
        env: {},
        log,
      }),
    );
    expect(err.code).toBe('invalid_config');
    expect(err.details?.issues).toEqual([
      'candidates.0: model spec "gemini:x": unknown provider "gemini" (expected openai, anthropic, builtin)',
      'candidates.1: model spec "openai:a@ftp://h": base URL "ftp://h" must be http or https',
      'candidates.2.baseUrl: base URL "http://***@h/v1" must not contain credentials',
      'evaluator: model spec "builtin:nope": unknown builtin model "nope" (expected content-search, path-search, definition-search)',
      'merger.model: unknown builtin model "x" (expected content-search, path-search, definition-search)',
    ]);
  });

  it('a missing key for a remote model is fatal at load, naming the variable; a loose key file names chmod 600', () => {
    const path = file({ candidates: 'openai:gpt-4.1', evaluator: { provider: 'anthropic', model: 'c', apiKeyEnv: 'ANTH_KEY' }, merger: 'builtin:content-search' });
    const err = thrown(() => loadRoster({ file: path, env: {}, log }));
    expect(err.code).toBe('invalid_config');
    expect(err.message).toBe(
      'openai:gpt-4.1 at https://api.openai.com/v1 needs an API key: set the environment variable OPENAI_API_KEY; anthropic:c at https://api.anthropic.com needs an API key: set the environment variable ANTH_KEY',
    );
    const loose = join(dir, 'loose.key');
    writeFileSync(loose, KEY, { mode: 0o644 });
    const bad = file({ candidates: { provider: 'openai', model: 'm', apiKeyFile: loose }, evaluator: 'builtin:content-search', merger: 'builtin:content-search' }, 'loose.json');
    expect(thrown(() => loadRoster({ file: bad, env: {}, log })).message).toContain(`run: chmod 600 ${loose}`);
  });

  it('applies per-task overrides on top (one = self-fusion, or three)', () => {
    const source = loadRosterConfig({ env: { OPENAI_API_KEY: KEY, ANTHROPIC_API_KEY: KEY }, log });
    const one = source.build({ candidate: ['openai:gpt-4.1'] });
    expect([1, 2, 3].map((s) => one.roster.candidate(s as 1 | 2 | 3).id)).toEqual(['openai:gpt-4.1', 'openai:gpt-4.1', 'openai:gpt-4.1']);
    expect(one.describe()).toMatchObject({ selfFusion: true, source: 'default (builtin engine) + overrides' });
    expect(one.roster.evaluator().id).toBe('builtin:content-search');
    const three = source.build({ candidate: ['openai:a', 'anthropic:b', 'builtin:path-search'], evaluator: 'anthropic:judge', merger: 'openai:writer' });
    expect([three.roster.candidate(1).id, three.roster.candidate(2).id, three.roster.candidate(3).id, three.roster.evaluator().id, three.roster.merger().id]).toEqual([
      'openai:a',
      'anthropic:b',
      'builtin:path-search',
      'anthropic:judge',
      'openai:writer',
    ]);
    expect(source.build({}).describe()).toEqual(source.describe());
    expect(thrown(() => source.build({ candidate: ['openai:a', 'openai:b'] })).message).toBe('candidate model overrides must name one model (self-fusion) or exactly three, got 2');
    expect(thrown(() => source.build({ evaluator: 'nope' }))).toMatchObject({ code: 'invalid_input', message: 'evaluator model: model spec "nope": must look like PROVIDER:MODEL[@BASE_URL]' });
  });

  it('binds keys to endpoints: an untrusted override may not send a key to an unconfigured base URL', () => {
    const path = file({ candidates: { provider: 'openai', model: 'qwen3', baseUrl: 'https://llm.internal.example/v1', apiKeyEnv: 'INTERNAL_KEY', timeoutMs: 30000 }, evaluator: 'builtin:content-search', merger: 'builtin:content-search' });
    const source = loadRosterConfig({ file: path, env: { INTERNAL_KEY: KEY, OPENAI_API_KEY: KEY }, log });
    const evil = thrown(() => source.build({ merger: 'openai:gpt@https://attacker.example/v1' }));
    expect(evil.code).toBe('invalid_input');
    expect(evil.message).toBe(
      "merger model: base URL https://attacker.example/v1 is not an endpoint this daemon is configured for; per-task overrides may only use the provider's default endpoint or a base URL listed in the models file",
    );
    // Not even a loopback port: a task must not make the daemon POST to arbitrary local services.
    expect(thrown(() => source.build({ merger: 'openai:gpt@http://127.0.0.1:6379' })).code).toBe('invalid_input');
    // A configured endpoint with another model inherits its key and transport, not its prices.
    const same = source.build({ merger: 'openai:llama@https://llm.internal.example/v1' }).describe().merger;
    expect(same).toMatchObject({ id: 'openai:llama', keySource: 'env INTERNAL_KEY', timeoutMs: 30000, prices: {} });
    // The default endpoint with the default key is fine.
    expect(source.build({ merger: 'openai:gpt-4.1' }).describe().merger).toMatchObject({ keySource: 'env OPENAI_API_KEY' });
    // The admin's own overrides (CLI) are trusted like the file.
    expect(source.build({ merger: 'openai:gpt@http://127.0.0.1:8000/v1' }, { trusted: true }).describe().merger).toMatchObject({ baseUrl: 'http://127.0.0.1:8000/v1' });
  });

  it('an untrusted override needing a key the daemon lacks is invalid_input naming the variable', () => {
    const source = loadRosterConfig({ env: {}, log });
    const err = thrown(() => source.build({ evaluator: 'anthropic:claude-sonnet-4-5' }));
    expect(err.code).toBe('invalid_input');
    expect(err.message).toBe('evaluator model: anthropic:claude-sonnet-4-5 at https://api.anthropic.com needs an API key: set the environment variable ANTHROPIC_API_KEY');
    expect(thrown(() => loadRoster({ env: {}, log, overrides: { evaluator: 'anthropic:x' }, trustOverrides: true })).code).toBe('invalid_config');
  });

  it('admin overrides (daemon flags) replace roles like the file and make their endpoints known to tasks', () => {
    const source = loadRosterConfig({ env: {}, log, adminOverrides: { candidate: ['openai:qwen3@http://127.0.0.1:11434/v1'] } });
    expect(source.describe()).toMatchObject({ source: 'default (builtin engine) + admin overrides', selfFusion: true });
    expect(source.describe().candidates[0]).toMatchObject({ id: 'openai:qwen3', baseUrl: 'http://127.0.0.1:11434/v1', keySource: null });
    // A task may now pick another model on that endpoint, but still not an unknown one.
    expect(source.build({ merger: 'openai:llama3@http://127.0.0.1:11434/v1' }).describe().merger).toMatchObject({ id: 'openai:llama3' });
    expect(thrown(() => source.build({ merger: 'openai:llama3@http://127.0.0.1:9999/v1' })).code).toBe('invalid_input');
    expect(thrown(() => loadRosterConfig({ env: {}, log, adminOverrides: { evaluator: 'x:y' } }))).toMatchObject({
      code: 'invalid_input',
      message: 'evaluator model: model spec "x:y": unknown provider "x" (expected openai, anthropic, builtin)',
    });
  });
});

describe('prompt budgets from the roster', () => {
  it('uses budgets from the models file, derives the others from context windows, and names each setting', () => {
    const path = file({
      candidates: [
        { provider: 'openai', model: 'small', baseUrl: 'http://127.0.0.1:9/v1', contextWindowTokens: 32_000, maxOutputTokens: 4_000 },
        { provider: 'openai', model: 'big', baseUrl: 'http://127.0.0.1:9/v1', contextWindowTokens: 128_000 },
        'builtin:path-search',
      ],
      evaluator: { provider: 'openai', model: 'judge', baseUrl: 'http://127.0.0.1:9/v1', contextWindowTokens: 200_000 },
      merger: 'builtin:content-search',
      budgets: { repair: 50_000 },
    });
    const { budget } = loadRoster({ file: path, env: {}, log });
    // The smallest window of the candidates, minus that model's output reservation.
    expect(budget.stageBudgetTokens).toEqual({ candidate: 28_000, evaluator: 200_000 - 8_192, repair: 50_000, merger: 180_000 });
    expect(budget.settings?.candidate).toBe('"budgets.candidate" in the models file, or a larger "contextWindowTokens" of the candidate models (the budget now derives from it)');
    expect(budget.settings?.repair).toBe('"budgets.repair" in the models file (now 50000 tokens)');
    expect(budget.settings?.merger).toBe('"budgets.merger" (tokens) in the models file, or "contextWindowTokens" of the merger model');
  });

  it('refuses a budget that is not a token count', () => {
    const err = thrown(() => loadRoster({ file: file({ candidates: 'builtin:path-search', evaluator: 'builtin:content-search', merger: 'builtin:content-search', budgets: { merger: 10, review: 5 } }), env: {}, log }));
    expect(err.message).toContain('budgets.merger: must be at least 1000 tokens');
    expect(err.message).toContain('budgets: unknown key(s) review');
  });
});
