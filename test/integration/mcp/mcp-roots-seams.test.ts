/**
 * `fusion mcp --root A --root B`: a task tool's optional `repo` is honoured inside the roots and
 * refused outside with a clear error; research_run and fusion_research refuse to fetch through a
 * daemon that lacks the egress seams `fusion mcp` itself was given (instead of quietly crawling without them).
 * The official SDK client drives the real CLI process against the stub-workflow daemon.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { dataPaths } from '../../../src/tasks/paths.js';
import { INVESTIGATE_ARGS, ROOT, startStubDaemon, stopDaemon, tempHome, type DaemonProc } from '../daemon/helpers.js';
import { createKey } from '../research/helpers.js';

async function open(socket: string, extra: string[], env: Record<string, string> = {}): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [join(ROOT, 'dist', 'src', 'cli', 'main.js'), 'mcp', '--socket', socket, ...extra],
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', FUSION_LOG_LEVEL: 'warn', ...env },
    stderr: 'pipe',
  });
  const client = new Client({ name: 'roots-test', version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  return client;
}

const text = (r: any): string => r.content[0].text as string;

describe('fusion mcp roots and egress seams', () => {
  let d: DaemonProc;
  let key: string;
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'fsn-mcp-roots-')));
  const a = join(base, 'a');
  const b = join(base, 'b');
  const outside = join(base, 'outside');
  beforeAll(async () => {
    for (const dir of [join(a, 'repo1'), join(b, 'repo2'), outside]) mkdirSync(dir, { recursive: true });
    const home = tempHome();
    d = await startStubDaemon(home, 20);
    key = await createKey(dataPaths(home).dbFile, 'ws_roots');
  });
  afterAll(async () => {
    if (d) await stopDaemon(d);
    rmSync(base, { recursive: true, force: true });
  });

  it('submits to a repo inside either root, refuses one outside or relative, and defaults to the first root', async () => {
    const c = await open(d.socket, ['--root', a, '--root', b]);
    try {
      for (const repo of [join(a, 'repo1'), join(b, 'repo2')]) {
        const r = await c.callTool({ name: 'fusion_investigate', arguments: { ...INVESTIGATE_ARGS, repo } });
        expect(r.isError, text(r)).toBe(false);
        const status = await c.callTool({ name: 'bg_status', arguments: { taskId: (r.structuredContent as { taskId: string }).taskId } });
        expect((status.structuredContent as { repo: string }).repo).toBe(repo);
      }
      const plain = await c.callTool({ name: 'fusion_investigate', arguments: INVESTIGATE_ARGS });
      const plainStatus = await c.callTool({ name: 'bg_status', arguments: { taskId: (plain.structuredContent as { taskId: string }).taskId } });
      expect((plainStatus.structuredContent as { repo: string }).repo).toBe(a);

      const out = await c.callTool({ name: 'fusion_investigate', arguments: { ...INVESTIGATE_ARGS, repo: outside } });
      expect(out.isError).toBe(true);
      expect(text(out)).toBe(`invalid_input: fusion_investigate.repo ${outside} is outside what this MCP server was started with (the roots ${a}, ${b}); start fusion mcp with --root for that directory`);
      const escape = await c.callTool({ name: 'fusion_investigate', arguments: { ...INVESTIGATE_ARGS, repo: join(a, '..', 'outside') } });
      expect(escape.isError).toBe(true);
      const relative = await c.callTool({ name: 'fusion_investigate', arguments: { ...INVESTIGATE_ARGS, repo: 'repo1' } });
      expect(text(relative)).toMatch(/^invalid_input: fusion_investigate\.repo must be an absolute path/);
    } finally {
      await c.close();
    }
  });

  it('without --root only the --repo is allowed', async () => {
    const c = await open(d.socket, ['--repo', join(a, 'repo1')]);
    try {
      const other = await c.callTool({ name: 'fusion_investigate', arguments: { ...INVESTIGATE_ARGS, repo: join(b, 'repo2') } });
      expect(other.isError).toBe(true);
      expect(text(other)).toContain(`(only its repository ${join(a, 'repo1')})`);
    } finally {
      await c.close();
    }
  });

  it('research_run refuses when the daemon lacks the seams fusion mcp was given', async () => {
    const c = await open(d.socket, ['--repo', a, '--resolve', 'docs.test:127.0.0.2', '--allow-cidr', '127.0.0.2/32'], { FUSION_RESEARCH_API_KEY: key });
    try {
      const r = await c.callTool({ name: 'research_run', arguments: { query: 'q', sourceUrls: ['http://docs.test/'], idempotencyKey: 'seams-1', confirm: true } });
      expect(r.isError).toBe(true);
      expect(text(r)).toMatch(/^invalid_config: research_run: fusion mcp was started with --resolve docs\.test:127\.0\.0\.2, --allow-cidr 127\.0\.0\.2\/32, but research runs are crawled by the daemon at .*, which does not have them/);
      // Nothing was created.
      const listed = await c.callTool({ name: 'research_list', arguments: {} });
      expect((listed.structuredContent as { runs: unknown[] }).runs).toEqual([]);
    } finally {
      await c.close();
    }
  });

  it('fusion_research refuses the same way: its sources are fetched by the daemon, which lacks the seams', async () => {
    const c = await open(d.socket, ['--repo', a, '--resolve', 'docs.test:127.0.0.2', '--allow-cidr', '127.0.0.2/32']);
    try {
      const r = await c.callTool({ name: 'fusion_research', arguments: { ...INVESTIGATE_ARGS, sources: [{ url: 'http://docs.test/', purpose: 'the page' }] } });
      expect(r.isError).toBe(true);
      expect(text(r)).toMatch(/^invalid_config: fusion_research: fusion mcp was started with --resolve docs\.test:127\.0\.0\.2, --allow-cidr 127\.0\.0\.2\/32, but fusion_research's sources are fetched by the daemon at .*, which does not have them/);
    } finally {
      await c.close();
    }
  });
});
