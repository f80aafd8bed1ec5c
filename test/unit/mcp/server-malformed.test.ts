import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { serveMcp } from '../../../src/mcp/server.js';
import type { FusionClient } from '../../../src/client/index.js';
import type { WebTools } from '../../../src/mcp/web-tools.js';

async function session(lines: string[]): Promise<any[]> {
  const input = new PassThrough();
  const output = new PassThrough();
  const out: any[] = [];
  let buf = '';
  output.on('data', (d: Buffer) => {
    buf += d.toString('utf8');
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      out.push(JSON.parse(buf.slice(0, nl)));
      buf = buf.slice(nl + 1);
    }
  });
  const client = {
    async *allEvents(opts: { signal: AbortSignal }) {
      await new Promise<void>((resolve) => opts.signal.addEventListener('abort', () => resolve()));
      yield* [];
    },
  } as unknown as FusionClient;
  const web = { read: async () => ({}), crawl: async () => ({}), close: async () => undefined } as unknown as WebTools;
  const served = serveMcp({ client, web, repo: '/nonexistent', version: '0', input, output });
  for (const l of lines) input.write(`${l}\n`);
  input.end();
  await served;
  return out;
}

describe('MCP server: malformed requests', () => {
  it('a tools/call whose name is an object that cannot become a string is refused, and the session goes on', async () => {
    const out = await session([
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":{"toString":null,"valueOf":null}}}',
      '{"jsonrpc":"2.0","id":2,"method":"ping"}',
    ]);
    expect(out.find((m) => m.id === 1)?.error?.code).toBe(-32602);
    expect(out.find((m) => m.id === 2)?.result).toEqual({});
  });
});
