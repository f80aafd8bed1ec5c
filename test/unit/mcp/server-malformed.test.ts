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

// Attack: a client that writes requests and never reads the replies. The server used to keep
// reading and queue every reply in memory (a few bytes asked, kilobytes queued, without end).
describe('MCP server: a client that never reads its replies', () => {
  it('stops reading requests while its replies are not being read, and answers every one once they are', async () => {
    const input = new PassThrough();
    const output = new PassThrough({ highWaterMark: 16 * 1024 });
    const client = {
      async *allEvents(opts: { signal: AbortSignal }) {
        await new Promise<void>((resolve) => opts.signal.addEventListener('abort', () => resolve()));
        yield* [];
      },
    } as unknown as FusionClient;
    const web = { read: async () => ({}), crawl: async () => ({}), close: async () => undefined } as unknown as WebTools;
    const served = serveMcp({ client, web, repo: '/nonexistent', version: '0', input, output });
    const REQUESTS = 2_000;
    for (let i = 0; i < REQUESTS; i++) input.write(`{"jsonrpc":"2.0","id":${i},"method":"tools/list"}\n`);
    input.end();
    // An absence: a server that queues without end has no "done" to wait for, so this window is
    // where it would pile replies up.
    await new Promise((r) => setTimeout(r, 300));
    const queued = output.readableLength + output.writableLength;
    expect(queued).toBeLessThan(1024 * 1024);
    let replies = 0;
    let buf = '';
    output.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        replies += 1;
        buf = buf.slice(nl + 1);
      }
    });
    await served;
    expect(replies).toBe(REQUESTS);
  });
});
