/**
 * Real models stumble: they call tools that do not exist (`bash`), send arguments that are not
 * JSON, print a tool call as text, and quote passages that are not on the page. Full runs
 * against fake OpenAI / Anthropic servers on loopback (bwrap sandboxes, builtin evaluator where
 * noted) show each stumble answered with an error tool result and the run going on, and every
 * delivered quote checked, the invented ones reported and never presented as confirmed.
 */
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildConfig, startDaemon, type Daemon } from '../../../src/main.js';
import { FusionClient } from '../../../src/client/index.js';
import { silentLogger } from '../../../src/log.js';
import { REJECTED_CALL_EVENT } from '../../../src/contracts/constants.js';
import { startFakeOpenAI, openaiCompletion, type FakeOpenAI } from '../../integration/models/fake-openai.js';
import { startFakeAnthropic, anthropicMessage, type FakeAnthropic } from '../../integration/models/fake-anthropic.js';
import { ORIGIN_IP, startHttpOrigin, type Listener } from '../../integration/egress/origin.js';

const KEY = 'sk-test-stumbling-models-0000000000000000';
const REPO = join(__dirname, '..', '..', 'fixtures', 'builtin-repo');
const ARGS = { objective: 'Find where numeric literals are tokenized', background: ['A small calculator with a lexer and a parser'], deliverable: 'The file and function that tokenize numbers' };

/** The first fixture line that mentions numbers: a real citation the tests can rely on. */
const TOKENIZER = 'src/lexer/tokenizer.js';
const tokenizerLines = readFileSync(join(REPO, TOKENIZER), 'utf8').split('\n');
const realIndex = tokenizerLines.findIndex((l) => /number/i.test(l));
const REAL = { citation: `${TOKENIZER}:${realIndex + 1}`, text: (tokenizerLines[realIndex] ?? '').trim() };
const INVENTED_QUOTE = 'function tokenizeNumbersWithMagic(source) {';

type Body = { messages?: Array<{ role: string; content: unknown }>; system?: unknown; model?: string };

function textOf(body: Body): string {
  const parts: string[] = typeof body.system === 'string' ? [body.system] : [];
  for (const m of body.messages ?? []) {
    if (typeof m.content === 'string') parts.push(m.content);
    else if (Array.isArray(m.content)) for (const b of m.content as Array<Record<string, unknown>>) parts.push(typeof b['text'] === 'string' ? b['text'] : typeof b['content'] === 'string' ? b['content'] : '');
  }
  return parts.join('\n');
}

/** Tool results the candidate has seen so far (OpenAI `tool` messages or Anthropic `tool_result` blocks). */
function toolResults(body: Body): number {
  return (body.messages ?? []).reduce((n, m) => n + (m.role === 'tool' ? 1 : Array.isArray(m.content) ? (m.content as Array<{ type?: string }>).filter((b) => b.type === 'tool_result').length : 0), 0);
}

function isMerger(body: Body): boolean {
  return textOf(body).includes('You write the final answer');
}

/** A candidate that answers with the real tokenizer line after its tools ran. */
const ANSWER = `## Findings\n\n- \`${REAL.citation}\`\n  > \`${REAL.text}\`\n\nNumbers are tokenized in \`${TOKENIZER}\`.\n`;

async function runTask(daemon: Daemon, path: '/v1/tasks/investigate' | '/v1/tasks/research', args: Record<string, unknown>): Promise<{ taskId: string; status: any; result: any }> {
  const client = new FusionClient(daemon.socketPath);
  const receipt = (await client.call('POST', path, { arguments: args, repo: REPO })) as any;
  await client.call('GET', `/v1/tasks/${receipt.taskId}/wait?timeoutMs=120000`);
  const status = await client.call('GET', `/v1/tasks/${receipt.taskId}`);
  const result = await client.call('GET', `/v1/tasks/${receipt.taskId}/result`);
  return { taskId: receipt.taskId, status, result };
}

function candidateLogRecords(home: string, taskId: string): Array<Record<string, any>> {
  const attempts = join(home, 'tasks', taskId, 'attempts');
  const out: Array<Record<string, any>> = [];
  for (const dir of readdirSync(attempts).filter((d) => d.startsWith('candidate-') && !d.endsWith('.tar'))) {
    const log = readdirSync(join(attempts, dir)).find((f) => f.endsWith('.tool-calls.jsonl'))!;
    for (const line of readFileSync(join(attempts, dir, log), 'utf8').split('\n').filter(Boolean)) out.push(JSON.parse(line));
  }
  return out;
}

async function daemonWith(models: { candidates: string[]; evaluator: string; merger: string }, env: Record<string, string>, extra: Partial<Parameters<typeof buildConfig>[0]> = {}): Promise<{ daemon: Daemon; home: string }> {
  const home = mkdtempSync(join(tmpdir(), 'fusion-stumble-'));
  const config = buildConfig({ home, socketPath: join(home, 'fusion.sock'), sandbox: 'bwrap', candidateModels: models.candidates, evaluatorModel: models.evaluator, mergerModel: models.merger, keepAttemptFiles: true, ...extra });
  return { daemon: await startDaemon(config, { log: silentLogger(), env }), home };
}

describe('models that stumble over tools', () => {
  const closers: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  it('OpenAI: a model that first calls `bash` and then answers properly produces a completed run', async () => {
    const fake: FakeOpenAI = await startFakeOpenAI({ apiKey: KEY });
    closers.push(() => fake.close());
    fake.setFallback((req) => {
      const body = req.body as Body;
      const seen = toolResults(body);
      if (seen === 0) return openaiCompletion({ toolCalls: [{ id: 'call_bash', name: 'bash', arguments: JSON.stringify({ command: 'grep -rn number .' }) }] });
      if (seen === 1) return openaiCompletion({ toolCalls: [{ id: 'call_grep', name: 'grep', arguments: JSON.stringify({ pattern: 'number', ignore_case: true }) }] });
      return openaiCompletion({ content: ANSWER });
    });
    const { daemon, home } = await daemonWith({ candidates: [`openai:shell-happy@${fake.baseUrl}`], evaluator: 'builtin:content-search', merger: 'builtin:definition-search' }, { OPENAI_API_KEY: KEY });
    closers.push(() => daemon.close());
    const run = await runTask(daemon, '/v1/tasks/investigate', ARGS);
    expect(run.status.state, JSON.stringify(run.status.error)).toBe('completed');
    // The model was told, as a tool result, that bash does not exist, and it went on.
    const second = (fake.bodies() as Body[]).find((b) => toolResults(b) === 1);
    expect(textOf(second!)).toContain('tool "bash" does not exist here and was not run; available tools: read, grep, find, ls.');
    const records = candidateLogRecords(home, run.taskId);
    expect(records.filter((r) => r.tool_name === REJECTED_CALL_EVENT)).toHaveLength(3);
    expect(records.some((r) => r.tool_name === 'bash')).toBe(false);
    expect(records.filter((r) => r.tool_name === 'grep' && r.status === 'ok')).toHaveLength(3);
    expect(run.result.answer.text).toContain(REAL.citation);
    expect(run.result.citations).toMatchObject({ unconfirmed: [] });
    expect(run.result.citations.confirmed).toBe(run.result.citations.checked);
  });

  it('Anthropic: an invented tool_use name is answered with an error tool_result and the run completes', async () => {
    const fake: FakeAnthropic = await startFakeAnthropic({ apiKey: KEY });
    closers.push(() => fake.close());
    fake.setFallback((req) => {
      const seen = toolResults(req.body as Body);
      if (seen === 0) return anthropicMessage({ toolUses: [{ id: 'toolu_shell', name: 'shell_exec', input: { cmd: 'ls' } }] });
      if (seen === 1) return anthropicMessage({ toolUses: [{ id: 'toolu_grep', name: 'grep', input: { pattern: 'number', ignore_case: true } }] });
      return anthropicMessage({ text: ANSWER });
    });
    const { daemon, home } = await daemonWith({ candidates: [`anthropic:claude-stumble@${fake.origin}`], evaluator: 'builtin:content-search', merger: 'builtin:definition-search' }, { ANTHROPIC_API_KEY: KEY });
    closers.push(() => daemon.close());
    const run = await runTask(daemon, '/v1/tasks/investigate', ARGS);
    expect(run.status.state, JSON.stringify(run.status.error)).toBe('completed');
    expect(candidateLogRecords(home, run.taskId).filter((r) => r.tool_name === REJECTED_CALL_EVENT)).toHaveLength(3);
  });

  it('malformed arguments and a tool call printed as text get error results; an invented quote in the final answer is reported unconfirmed', async () => {
    const fake: FakeOpenAI = await startFakeOpenAI({ apiKey: KEY });
    closers.push(() => fake.close());
    fake.setFallback((req) => {
      const body = req.body as Body;
      if (isMerger(body)) {
        // A merger that keeps the real line and adds one it made up, calling both confirmed.
        return openaiCompletion({ content: `Numbers are tokenized in \`${TOKENIZER}\`. Confirmed lines:\n\n- \`${REAL.citation}\`\n  > \`${REAL.text}\`\n- \`${REAL.citation}\`\n  > \`${INVENTED_QUOTE}\`\n` });
      }
      const seen = toolResults(body);
      if (seen === 0 && body.model === 'bad-args') return openaiCompletion({ toolCalls: [{ id: 'call_bad', name: 'grep', arguments: '{"pattern": "number", ' }] });
      if (seen === 0 && body.model === 'text-call') return openaiCompletion({ content: '<tool_call>{"name": "run_terminal_cmd", "arguments": {"command": "ls"}}</tool_call>' });
      if (seen === 0 && body.model === 'bash-first') return openaiCompletion({ toolCalls: [{ id: 'call_bash', name: 'bash', arguments: '{"command":"ls"}' }] });
      if (seen === 1) return openaiCompletion({ toolCalls: [{ id: 'call_grep', name: 'grep', arguments: JSON.stringify({ pattern: 'number', ignore_case: true }) }] });
      return openaiCompletion({ content: ANSWER });
    });
    const { daemon, home } = await daemonWith(
      { candidates: ['bad-args', 'text-call', 'bash-first'].map((m) => `openai:${m}@${fake.baseUrl}`), evaluator: 'builtin:content-search', merger: `openai:inventive-writer@${fake.baseUrl}` },
      { OPENAI_API_KEY: KEY },
    );
    closers.push(() => daemon.close());
    const run = await runTask(daemon, '/v1/tasks/investigate', ARGS);
    expect(run.status.state, JSON.stringify(run.status.error)).toBe('completed');
    const bodies = fake.bodies() as Body[];
    const afterStumble = (model: string): string => textOf(bodies.find((b) => b.model === model && toolResults(b) === 1)!);
    expect(afterStumble('bad-args')).toContain('grep was not run: its arguments must be a JSON object, and they are not valid JSON.');
    expect(afterStumble('text-call')).toContain('tool "run_terminal_cmd" does not exist here and was not run');
    expect(candidateLogRecords(home, run.taskId).filter((r) => r.tool_name === REJECTED_CALL_EVENT)).toHaveLength(3);

    // The delivered answer was checked quote by quote.
    expect(run.result.citations).toEqual({ checked: 2, confirmed: 1, unconfirmed: [{ kind: 'repository', citation: REAL.citation, status: 'quote_mismatch', quoted: INVENTED_QUOTE }] });
    const text: string = run.result.answer.text;
    const notice = text.indexOf('## Unconfirmed citations');
    expect(notice).toBeGreaterThan(0);
    expect(text.slice(notice)).toContain(`- \`${REAL.citation}\` quotes text that does not match the file`);
    expect(text.slice(notice)).toContain('1 of 2 citations in this answer could not be confirmed');
  });
});

describe('an invented web passage (research, builtin evaluator and merger)', () => {
  const PAGE = `<html><body><h1>Token bucket rate limiting</h1>
<p>A token bucket refills at a fixed rate and each request spends one token; when the bucket is empty the request is rejected with status 429.</p>
</body></html>`;
  const REAL_PASSAGE = 'when the bucket is empty the request is rejected with status 429.';
  const INVENTED_PASSAGE = 'Token buckets never reject requests; they queue them for up to ten minutes.';
  let origin: Listener;
  let fake: FakeOpenAI;
  let daemon: Daemon;

  beforeAll(async () => {
    origin = await startHttpOrigin((req, res) => {
      res.writeHead(req.url === '/guide' ? 200 : 404, { 'content-type': 'text/html; charset=utf-8' });
      res.end(req.url === '/guide' ? PAGE : '');
    }, ORIGIN_IP);
    fake = await startFakeOpenAI({ apiKey: KEY });
    const url = `http://docs.example.test:${origin.port}/guide`;
    fake.setFallback((req) => {
      if (toolResults(req.body as Body) === 0) return openaiCompletion({ toolCalls: [{ id: 'call_fetch', name: 'fusion_web_fetch', arguments: JSON.stringify({ url }) }] });
      return openaiCompletion({ content: `## Findings\n\n- ${url} — how requests are rejected\n  > ${REAL_PASSAGE}\n\n- ${url} — queueing\n  > ${INVENTED_PASSAGE}\n` });
    });
    ({ daemon } = await daemonWith({ candidates: [`openai:quoter@${fake.baseUrl}`], evaluator: 'builtin:content-search', merger: 'builtin:content-search' }, { OPENAI_API_KEY: KEY }, { egressResolve: [`docs.example.test:${ORIGIN_IP}`], egressAllowCidrs: [`${ORIGIN_IP}/32`] }));
  });

  afterAll(async () => {
    await daemon?.close();
    await fake?.close();
    await origin?.close();
  });

  it('quotes only the passage found on the page, reports the other as left out, and never calls it confirmed', async () => {
    const url = `http://docs.example.test:${origin.port}/guide`;
    const run = await runTask(daemon, '/v1/tasks/research', {
      objective: 'Explain how token bucket rate limiting rejects requests',
      background: ['We are choosing a rate limiter'],
      deliverable: 'A short explanation with sources',
      sources: [{ url, purpose: 'How the bucket rejects requests' }],
    });
    expect(run.status.state, JSON.stringify(run.status.error)).toBe('completed');
    const text: string = run.result.answer.text;
    expect(text).toContain(REAL_PASSAGE);
    expect(text).not.toContain(INVENTED_PASSAGE);
    expect(text).toContain(`Unconfirmed: 1 quoted passage attributed to ${url} was not found on the page as fetched and is left out.`);
    expect(run.result.citations.unconfirmed).toEqual([]);
    expect(run.result.citations.checked).toBeGreaterThan(0);
  });
});
