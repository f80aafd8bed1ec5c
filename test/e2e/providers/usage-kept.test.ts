/**
 * Usage is kept when a run does not complete: every model call a failed or cancelled run made
 * was paid for, so status and the first result retrieval report it, per stage and model.
 * Fake OpenAI server on loopback, bwrap sandboxes.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildConfig, startDaemon, type Daemon } from '../../../src/main.js';
import { FusionClient } from '../../../src/client/index.js';
import { silentLogger } from '../../../src/log.js';
import { startFakeOpenAI, openaiCompletion, openaiError, type FakeOpenAI } from '../../integration/models/fake-openai.js';
import { waitFor } from '../../helpers/wait.js';

const KEY = 'sk-test-usage-kept-00000000000000000000000';
const REPO = join(__dirname, '..', '..', 'fixtures', 'builtin-repo');
const ARGS = { objective: 'Find where numeric literals are tokenized', background: ['A small calculator with a lexer and a parser'], deliverable: 'The file and function that tokenize numbers' };
const MODELS = ['cand-one', 'cand-two', 'cand-three'];

type Body = { model?: string; messages?: Array<{ role: string; content: unknown }> };
const toolResults = (b: Body): number => (b.messages ?? []).filter((m) => m.role === 'tool').length;
const isMerger = (b: Body): boolean => (b.messages ?? []).some((m) => typeof m.content === 'string' && m.content.includes('You write the final answer'));

async function start(fake: FakeOpenAI, merger: string): Promise<{ daemon: Daemon; client: FusionClient }> {
  const home = mkdtempSync(join(tmpdir(), 'fusion-usage-'));
  const config = buildConfig({ home, socketPath: join(home, 'fusion.sock'), sandbox: 'bwrap', candidateModels: MODELS.map((m) => `openai:${m}@${fake.baseUrl}`), evaluatorModel: 'builtin:content-search', mergerModel: merger });
  const daemon = await startDaemon(config, { log: silentLogger(), env: { OPENAI_API_KEY: KEY } });
  return { daemon, client: new FusionClient(daemon.socketPath) };
}

/** Requests the fake received per model (each one a model call the run made). */
function callsPerModel(fake: FakeOpenAI): Map<string, number> {
  const out = new Map<string, number>();
  for (const b of fake.bodies() as Body[]) out.set(b.model ?? '', (out.get(b.model ?? '') ?? 0) + 1);
  return out;
}

describe('usage so far is kept on cancel and failure', () => {
  const closers: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  it('a cancelled run reports the usage of every model call it made, in status and in the first result retrieval', async () => {
    const fake = await startFakeOpenAI({ apiKey: KEY });
    closers.push(() => fake.close());
    // Each candidate greps once (a paid call with known tokens), then its next call never answers.
    fake.setFallback((req) =>
      toolResults(req.body as Body) === 0
        ? openaiCompletion({ toolCalls: [{ id: 'c1', name: 'grep', arguments: '{"pattern":"number"}' }], usage: { prompt_tokens: 120, completion_tokens: 12 } })
        : { hang: 'headers', json: {} },
    );
    const { daemon, client } = await start(fake, 'builtin:definition-search');
    closers.push(() => daemon.close());
    const receipt = (await client.call('POST', '/v1/tasks/investigate', { arguments: ARGS, repo: REPO })) as { taskId: string };
    // Wait until every candidate has made its second (hanging) call.
    await waitFor('six model calls at the fake provider', () => fake.requests.length >= 6, 30_000, 50);
    expect(fake.requests.length).toBe(6);

    const view = (await client.call('POST', `/v1/tasks/${receipt.taskId}/cancel`)) as any;
    expect(view.state).toBe('cancelled');
    const status = (await client.call('GET', `/v1/tasks/${receipt.taskId}`)) as any;
    const calls = callsPerModel(fake);
    for (const usage of [view.usage, status.usage]) {
      expect(usage.entries.map((e: any) => e.stage).sort()).toEqual(['candidate-1', 'candidate-2', 'candidate-3']);
      for (const e of usage.entries) {
        // Two calls each: the grep turn (answered, 120 in / 12 out) and the one cut short by the cancel.
        expect(e.requests).toBe(calls.get(String(e.model).replace('openai:', '')));
        expect(e).toMatchObject({ requests: 2, inputTokens: 120, outputTokens: 12 });
      }
      expect(usage.totals).toEqual({ requests: 6, inputTokens: 360, outputTokens: 36 });
    }
    const first = (await client.call('GET', `/v1/tasks/${receipt.taskId}/result`)) as any;
    expect(first).toMatchObject({ status: 'cancelled', answer: { present: false }, usage: { totals: { requests: 6 } } });
    const second = (await client.call('GET', `/v1/tasks/${receipt.taskId}/result`)) as any;
    expect(second.usage).toBeUndefined();
  });

  it('a failed run keeps the usage of every stage that ran, the failing one included', async () => {
    const fake = await startFakeOpenAI({ apiKey: KEY });
    closers.push(() => fake.close());
    fake.setFallback((req) => {
      const body = req.body as Body;
      if (isMerger(body)) return openaiError(400, 'this merger refuses');
      if (toolResults(body) === 0) return openaiCompletion({ toolCalls: [{ id: 'c1', name: 'grep', arguments: '{"pattern":"number"}' }], usage: { prompt_tokens: 100, completion_tokens: 10 } });
      return openaiCompletion({ content: 'Numbers are tokenized in `src/lexer/tokenizer.js`.', usage: { prompt_tokens: 200, completion_tokens: 20 } });
    });
    const { daemon, client } = await start(fake, `openai:failing-writer@${fake.baseUrl}`);
    closers.push(() => daemon.close());
    const receipt = (await client.call('POST', '/v1/tasks/investigate', { arguments: ARGS, repo: REPO })) as { taskId: string };
    await client.call('GET', `/v1/tasks/${receipt.taskId}/wait?timeoutMs=120000`);
    const status = (await client.call('GET', `/v1/tasks/${receipt.taskId}`)) as any;
    expect(status).toMatchObject({ state: 'failed', error: { code: 'model_error' } });
    const byStage = Object.fromEntries(status.usage.entries.map((e: any) => [e.stage, e]));
    for (const slot of [1, 2, 3]) expect(byStage[`candidate-${slot}`]).toMatchObject({ requests: 2, inputTokens: 300, outputTokens: 30 });
    expect(byStage['evaluator']).toMatchObject({ model: 'builtin:content-search', requests: 1 });
    expect(byStage['merger']).toMatchObject({ model: 'openai:failing-writer', requests: 1, inputTokens: 0, outputTokens: 0 });
    const first = (await client.call('GET', `/v1/tasks/${receipt.taskId}/result`)) as any;
    expect(first.usage.totals.requests).toBe(3 * 2 + 1 + 1);
  });
});
