/**
 * `fusion models check` end to end against the fake servers: reachability, latency, tool-call
 * support, JSON and human output, exit codes, and the key never printed.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { modelsCommand } from '../../../src/cli/models-command.js';
import type { ModelsCheckReport } from '../../../src/models/models-check.js';
import { anthropicText, startFakeAnthropic, type FakeAnthropic } from './fake-anthropic.js';
import { openaiToolCalls, startFakeOpenAI, type FakeOpenAI } from './fake-openai.js';
import { rejectionOf, SENTINEL_KEY } from './helpers.js';

let dir: string;
let openai: FakeOpenAI;
let anthropic: FakeAnthropic;
let out: string;
let err: string;
const io = { stdout: (t: string) => void (out += t), stderr: (t: string) => void (err += t) };

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fusion-models-check-'));
  openai = await startFakeOpenAI({ apiKey: SENTINEL_KEY, fallback: openaiToolCalls([{ id: 'c1', name: 'ping', arguments: '{"echo":"pong"}' }]) });
  anthropic = await startFakeAnthropic({ apiKey: SENTINEL_KEY, fallback: anthropicText('pong') });
  out = '';
  err = '';
});

afterEach(async () => {
  await openai.close();
  await anthropic.close();
  rmSync(dir, { recursive: true, force: true });
  expect(out + err).not.toContain(SENTINEL_KEY);
});

function modelsFile(config: unknown): string {
  const file = join(dir, 'models.json');
  writeFileSync(file, JSON.stringify(config));
  return file;
}

describe('fusion models check', () => {
  it('checks each distinct model once and reports reachability, latency and tool-call support (--json)', async () => {
    const file = modelsFile({
      candidates: { provider: 'openai', model: 'qwen3', baseUrl: openai.baseUrl, apiKeyEnv: 'LOCAL_KEY' },
      evaluator: `anthropic:claude-fake@${anthropic.baseUrl}`,
      merger: 'builtin:content-search',
    });
    const code = await modelsCommand(['check', '--models-file', file, '--json'], { LOCAL_KEY: SENTINEL_KEY, ANTHROPIC_API_KEY: SENTINEL_KEY }, io);
    const report = JSON.parse(out) as ModelsCheckReport;
    expect(code).toBe(0);
    expect(report.ok).toBe(true);
    expect(report.source).toBe(`file ${file}`);
    expect(report.models).toHaveLength(3);
    const [cand, evaluator, merger] = report.models;
    expect(cand).toMatchObject({ roles: ['candidate 1', 'candidate 2', 'candidate 3'], id: 'openai:qwen3', baseUrl: openai.baseUrl, reachable: true, toolCalls: true, stopReason: 'tool_calls' });
    expect(typeof cand!.latencyMs).toBe('number');
    expect(evaluator).toMatchObject({ roles: ['evaluator'], id: 'anthropic:claude-fake', reachable: true, toolCalls: false });
    expect(merger).toMatchObject({ roles: ['merger'], id: 'builtin:content-search', engine: 'builtin', reachable: true });
    // One minimal request per remote model, offering the one trivial tool.
    expect(openai.bodies()).toHaveLength(1);
    expect(anthropic.bodies()).toHaveLength(1);
    expect(openai.bodies()[0]).toMatchObject({ model: 'qwen3', tools: [{ type: 'function', function: { name: 'ping' } }] });
    expect(anthropic.bodies()[0]).toMatchObject({ model: 'claude-fake', tools: [{ name: 'ping' }] });
  });

  it('fails (exit 1) when a candidate model answers in text instead of calling the tool; flags override the file', async () => {
    const code = await modelsCommand(
      ['check', '--candidate-model', `anthropic:claude-fake@${anthropic.baseUrl}`, '--evaluator-model', 'builtin:path-search', '--merger-model', 'builtin:content-search'],
      { ANTHROPIC_API_KEY: SENTINEL_KEY },
      io,
    );
    expect(code).toBe(1);
    expect(out).toContain('candidate 1, candidate 2, candidate 3: anthropic:claude-fake');
    expect(out).toContain('tool calls: NO');
    expect(out).toContain('some models are not usable');
  });

  it('reports an unreachable model with its error', async () => {
    const dead = await startFakeOpenAI();
    const url = dead.baseUrl;
    await dead.close();
    const file = modelsFile({
      candidates: [`openai:m1@${openai.baseUrl}`, `openai:m2@${url}`, 'builtin:definition-search'],
      evaluator: 'builtin:content-search',
      merger: 'builtin:content-search',
    });
    const code = await modelsCommand(['check', '--models-file', file, '--timeout', '5'], { OPENAI_API_KEY: SENTINEL_KEY }, io);
    expect(code).toBe(1);
    expect(out).toMatch(/candidate 2: openai:m2 @ http:\/\/127\.0\.0\.1:\d+\/v1 {2}UNREACHABLE {2}model_error: .*ECONNREFUSED/);
    expect(out).toMatch(/candidate 1: openai:m1 .* ok {2}\d+ ms {2}tool calls: yes/);
  });

  it('a hung model is reported unreachable once --timeout passes', async () => {
    openai.setFallback({ hang: 'headers' });
    const started = Date.now();
    const code = await modelsCommand(['check', '--candidate-model', `openai:slow@${openai.baseUrl}`, '--timeout', '0.3'], { OPENAI_API_KEY: SENTINEL_KEY }, io);
    expect(code).toBe(1);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(out).toContain("UNREACHABLE  model_error: openai:slow: no complete response before the caller's deadline");
  });

  it('with nothing configured checks the builtin roster without any request', async () => {
    const code = await modelsCommand(['check'], {}, io);
    expect(code).toBe(0);
    expect(out).toContain('models (default (builtin engine)):');
    expect(out).toContain('builtin:content-search');
    expect(out).toContain('builtin:path-search');
    expect(out).toContain('builtin:definition-search');
  });

  it('uses FUSION_MODELS_FILE when no --models-file is given', async () => {
    const file = modelsFile({ candidates: `openai:qwen3@${openai.baseUrl}`, evaluator: 'builtin:content-search', merger: 'builtin:content-search' });
    const code = await modelsCommand(['check', '--json'], { FUSION_MODELS_FILE: file, OPENAI_API_KEY: SENTINEL_KEY }, io);
    expect(code).toBe(0);
    expect((JSON.parse(out) as ModelsCheckReport).source).toBe(`env FUSION_MODELS_FILE (${file})`);
  });

  it('bad specs and missing keys fail clearly', async () => {
    const bad = await rejectionOf(modelsCommand(['check', '--candidate-model', 'gemini:pro'], {}, io));
    expect(bad.code).toBe('invalid_input');
    expect(bad.message).toBe('candidate model: model spec "gemini:pro": unknown provider "gemini" (expected openai, anthropic, builtin)');
    const missing = await rejectionOf(modelsCommand(['check', '--evaluator-model', 'anthropic:claude-sonnet-4-5'], {}, io));
    expect(missing.code).toBe('invalid_config');
    expect(missing.message).toContain('set the environment variable ANTHROPIC_API_KEY');
    const two = await rejectionOf(modelsCommand(['check', '--candidate-model', 'builtin:path-search', '--candidate-model', 'builtin:path-search'], {}, io));
    expect(two.message).toBe('--candidate-model must be given once (self-fusion) or three times, got 2');
    expect(await modelsCommand(['help'], {}, io)).toBe(0);
    expect(out).toContain('fusion models check');
  });
});
