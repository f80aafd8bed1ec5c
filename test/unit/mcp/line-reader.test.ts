import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { boundedLines, type LineItem } from '../../../src/mcp/line-reader.js';

async function read(chunks: Array<string | Buffer>, maxBytes: number): Promise<LineItem[]> {
  const input = new PassThrough();
  const items: LineItem[] = [];
  const done = (async () => {
    for await (const item of boundedLines(input, maxBytes)) items.push(item);
  })();
  for (const c of chunks) input.write(c);
  input.end();
  await done;
  return items;
}

const line = (text: string): LineItem => ({ kind: 'line', text });

describe('bounded newline-delimited reader (MCP stdio)', () => {
  it('splits on LF, strips a CR before it, keeps a last line without newline, and joins a UTF-8 character split across chunks', async () => {
    const euro = Buffer.from('€', 'utf8');
    expect(await read(['a\r\nb', '\n\nc', euro.subarray(0, 1), euro.subarray(1), '\nlast'], 100)).toEqual([line('a'), line('b'), line(''), line('c€'), line('last')]);
  });

  it('a line of exactly the limit passes; one byte more is reported once and dropped through its newline, then reading goes on', async () => {
    expect(await read([`${'x'.repeat(8)}\n`], 8)).toEqual([line('x'.repeat(8))]);
    expect(await read([`${'x'.repeat(9)}\nnext\n`], 8)).toEqual([{ kind: 'oversized', maxBytes: 8 }, line('next')]);
  });

  // Edge: a CRLF client's message of exactly the limit was refused (the CR was counted).
  it('a CRLF line of exactly the limit passes (its CR belongs to the delimiter, in one chunk or split before the LF); one byte more does not', async () => {
    expect(await read([`${'x'.repeat(8)}\r\n`], 8)).toEqual([line('x'.repeat(8))]);
    expect(await read([`${'x'.repeat(8)}\r`, '\nnext\n'], 8)).toEqual([line('x'.repeat(8)), line('next')]);
    expect(await read([`${'x'.repeat(9)}\r\nnext\n`], 8)).toEqual([{ kind: 'oversized', maxBytes: 8 }, line('next')]);
    expect(await read([`${'x'.repeat(8)}y`, '\nnext\n'], 8)).toEqual([{ kind: 'oversized', maxBytes: 8 }, line('next')]);
    expect(await read([`${'x'.repeat(8)}\r`], 8)).toEqual([line('x'.repeat(8))]);
  });

  it('an endless line is reported as soon as it passes the limit, before any newline, and nothing of it is kept', async () => {
    const input = new PassThrough();
    const it = boundedLines(input, 1024)[Symbol.asyncIterator]();
    const first = it.next();
    for (let i = 0; i < 4; i++) input.write('y'.repeat(512));
    expect((await first).value).toEqual({ kind: 'oversized', maxBytes: 1024 });
    const second = it.next();
    for (let i = 0; i < 100; i++) input.write('y'.repeat(64 * 1024));
    input.write('still the same line\n{"ok":1}\n');
    expect((await second).value).toEqual(line('{"ok":1}'));
    input.end();
    expect((await it.next()).done).toBe(true);
  });

  it('an over-long last line without newline yields only the report', async () => {
    expect(await read(['z'.repeat(20)], 8)).toEqual([{ kind: 'oversized', maxBytes: 8 }]);
  });
});
