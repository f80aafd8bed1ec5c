/**
 * web_search (the MCP tool, in a real `fusion mcp` process) and `fusion search` (the CLI) against
 * the loopback fakes of both providers; the allow list refusal; the sentinel origin that must see
 * no request; `fusion research --from-search` listing results and submitting nothing without --yes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../../src/cli/main.js';
import { UNTRUSTED_CAUTION } from '../../../src/contracts/research-limits.js';
import { startStubDaemon, stopDaemon, tempHome, type DaemonProc } from '../daemon/helpers.js';
import { startMcp } from '../mcp/mcp-process.js';
import type { Listener } from '../egress/origin.js';
import { BRAVE_HOST, SEARCH_KEY, SEARXNG_HOST, seams, startFakeBrave, startFakeSearxng, startSearchSentinel, type FakeProvider } from './fake-providers.js';

let sentinel: Listener;
let searxng: FakeProvider;
let brave: FakeProvider;
let daemon: DaemonProc;

function seamEnv(): Record<string, string> {
  const s = seams();
  return { FUSION_EGRESS_RESOLVE: s.resolve.join(','), FUSION_EGRESS_ALLOW_CIDRS: s.allowCidrs.join(',') };
}
function searxngEnv(): Record<string, string> {
  return { ...seamEnv(), FUSION_SEARCH_PROVIDER: 'searxng', FUSION_SEARCH_URL: `http://${SEARXNG_HOST}:${String(searxng.port)}`, FUSION_SEARCH_ALLOW_HOSTS: SEARXNG_HOST };
}
function braveEnv(): Record<string, string> {
  return { ...seamEnv(), FUSION_SEARCH_PROVIDER: 'brave', FUSION_SEARCH_URL: `http://${BRAVE_HOST}:${String(brave.port)}`, FUSION_SEARCH_ALLOW_HOSTS: BRAVE_HOST, FUSION_SEARCH_API_KEY: SEARCH_KEY };
}

async function cli(argv: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io = { stdout: (t: string) => void (stdout += t), stderr: (t: string) => void (stderr += t), readStdin: () => '' };
  const code = await runCli(argv, env, io).catch((err: { code?: string; message?: string }) => {
    stderr += `fusion: ${String(err.code)}: ${String(err.message)}\n`;
    return err.code === 'invalid_input' ? 2 : 1;
  });
  return { code, stdout, stderr };
}

beforeAll(async () => {
  sentinel = await startSearchSentinel();
  searxng = await startFakeSearxng(sentinel);
  brave = await startFakeBrave(sentinel);
  daemon = await startStubDaemon(tempHome(), 30);
});

afterAll(async () => {
  if (daemon) await stopDaemon(daemon);
  await Promise.all([sentinel.close(), searxng.close(), brave.close()]);
});

describe('fusion search', () => {
  it('prints the searxng results as Markdown headed by the caution', async () => {
    const out = await cli(['search', 'token', 'bucket'], searxngEnv());
    expect(out.code).toBe(0);
    expect(out.stdout.startsWith(`${UNTRUSTED_CAUTION}\n\n# Web search (searxng): \`token bucket\``)).toBe(true);
    expect(out.stdout).toContain('[https://docs.example.org/token-bucket]');
    expect(searxng.requests.at(-1)).toBe('/search?q=token+bucket&format=json');
  });

  it('--json prints the brave results; the key never shows on stdout or stderr', async () => {
    const out = await cli(['search', 'token bucket', '--count', '2', '--json'], braveEnv());
    expect(out.code).toBe(0);
    const body = JSON.parse(out.stdout) as { provider: string; results: Array<{ title: string; fetchable: boolean }> };
    expect(body.provider).toBe('brave');
    expect(body.results.map((r) => r.title)).toEqual(['Rate limiting with a token bucket', 'Sentinel']);
    expect(brave.requests.at(-1)).toBe('/res/v1/web/search?q=token+bucket&count=2');
    expect(`${out.stdout}${out.stderr}`).not.toContain(SEARCH_KEY);
  });

  it('refuses a provider host outside the allow list (exit 2, nothing sent)', async () => {
    const before = brave.connections;
    const out = await cli(['search', 'q'], { ...braveEnv(), FUSION_SEARCH_ALLOW_HOSTS: 'api.search.brave.com' });
    expect(out.code).toBe(2);
    expect(out.stderr).toContain('fusion search: invalid_config: the search provider host brave.test is not in FUSION_SEARCH_ALLOW_HOSTS');
    expect(brave.connections).toBe(before);
  });

  it('names provider errors with their code; exit 2 without a provider', async () => {
    brave.mode = 'quota';
    try {
      const quota = await cli(['search', 'q'], braveEnv());
      expect(quota.code).toBe(4);
      expect(quota.stderr).toContain('fusion search: search_quota_exceeded: the brave search provider refused the query: quota or rate limit reached (HTTP 429)');
    } finally {
      brave.mode = 'ok';
    }
    const none = await cli(['search', 'q'], seamEnv());
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('fusion search: search_unavailable: web search needs a provider: set FUSION_SEARCH_PROVIDER');
  });

  it('research --from-search lists the results and submits nothing without --yes', async () => {
    const args = ['research', '--from-search', 'token bucket', '--objective', 'o', '--background', 'b', '--deliverable', 'd', '--socket', daemon.socket];
    const out = await cli(args, searxngEnv());
    expect(out.code).toBe(2);
    expect(out.stderr).toContain('# Web search (searxng)');
    expect(out.stderr).toContain('nothing was submitted: re-run with --yes to use these 2 search result URL(s) as research sources');
    const listed = await cli(['tasks', '--json', '--socket', daemon.socket], {});
    expect((JSON.parse(listed.stdout) as { tasks: unknown[] }).tasks).toEqual([]);
  });

  it('research --from-search --yes submits the fetchable results as sources', async () => {
    const args = ['research', '--from-search', 'token bucket', '--yes', '--objective', 'o', '--background', 'b', '--deliverable', 'd', '--socket', daemon.socket, '--json'];
    const out = await cli(args, searxngEnv());
    expect(out.code).toBe(0);
    const receipt = JSON.parse(out.stdout) as { taskId: string };
    expect(receipt.taskId).toMatch(/^research-/u);
    expect(sentinel.connections).toBe(0);
  });
});

describe('web_search (fusion mcp)', () => {
  async function session(env: Record<string, string>) {
    const { proc, next, stderr } = startMcp(daemon.socket, env);
    let id = 0;
    const call = (method: string, params?: unknown): Promise<any> => {
      const myId = ++id;
      proc.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', id: myId, method, params })}\n`);
      return next((m) => m.id === myId);
    };
    await call('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '0' } });
    const close = async (): Promise<void> => {
      proc.stdin!.end();
      await new Promise((r) => proc.once('exit', r));
    };
    return { call, close, stderr };
  }

  it('searches both providers; results carry fetchable flags; the sentinel sees nothing', async () => {
    for (const env of [searxngEnv(), braveEnv()]) {
      const s = await session(env);
      try {
        const reply = await s.call('tools/call', { name: 'web_search', arguments: { query: 'token bucket', count: 3 } });
        expect(reply.result.isError).toBe(false);
        expect(reply.result.content[0].text.startsWith(UNTRUSTED_CAUTION)).toBe(true);
        const results = reply.result.structuredContent.results as Array<{ fetchable: boolean; canonicalUrl: string | null }>;
        expect(results.length).toBe(3);
        expect(results.filter((r) => r.fetchable).length).toBe(2);
        expect(JSON.stringify(reply)).not.toContain(SEARCH_KEY);
        expect(s.stderr()).not.toContain(SEARCH_KEY);
      } finally {
        await s.close();
      }
    }
    expect(sentinel.connections).toBe(0);
  });

  it('without a provider web_search is a tool error naming the settings; bad arguments name the field', async () => {
    const s = await session(seamEnv());
    try {
      const reply = await s.call('tools/call', { name: 'web_search', arguments: { query: 'q' } });
      expect(reply.result.isError).toBe(true);
      expect(reply.result.content[0].text).toMatch(/^search_unavailable: web search needs a provider/u);
      const bad = await s.call('tools/call', { name: 'web_search', arguments: { query: 'q', count: 50 } });
      expect(bad.result.content[0].text).toMatch(/^invalid_input: web_search arguments is invalid: count: /u);
    } finally {
      await s.close();
    }
  });

  it('refuses to start with a provider host outside the allow list; nothing is sent', async () => {
    const before = searxng.connections;
    const { proc, stderr } = startMcp(daemon.socket, { ...searxngEnv(), FUSION_SEARCH_ALLOW_HOSTS: 'elsewhere.test' });
    const code = await new Promise<number | null>((r) => proc.once('exit', r));
    expect(code).not.toBe(0);
    expect(stderr()).toContain('invalid_config: the search provider host searx.test is not in FUSION_SEARCH_ALLOW_HOSTS (elsewhere.test)');
    expect(searxng.connections).toBe(before);
  });
});
