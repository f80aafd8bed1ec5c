/**
 * The stdio MCP server bounds each message (hostile clients): a client that sends an
 * endless line gets a JSON-RPC error naming the limit as soon as the line passes it, the bytes
 * are dropped up to the next newline, and the session goes on; the process never buffers the
 * line and never dies.
 */
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStubDaemon, stopDaemon, tempHome, type DaemonProc } from '../daemon/helpers.js';
import { startMcp } from './mcp-process.js';

const LIMIT = 64 * 1024;


const write = (proc: ChildProcess, text: string): Promise<void> => new Promise((resolve, reject) => proc.stdin!.write(text, (e) => (e ? reject(e) : resolve())));

describe('fusion mcp: message size limit', () => {
  let d: DaemonProc;
  beforeAll(async () => {
    d = await startStubDaemon(tempHome(), 30);
  });
  afterAll(async () => {
    if (d) await stopDaemon(d);
  });

  it('an endless line gets -32600 naming the limit before its newline; the rest of it is dropped and the session goes on', async () => {
    const { proc, next, stderr } = startMcp(d.socket, { FUSION_MCP_MAX_MESSAGE_BYTES: String(LIMIT) });
    try {
      await write(proc, `${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' })}\n`);
      expect((await next((m) => m.id === 1)).result).toEqual({});
      // A message that starts well and never ends: 32 MiB (512× the limit) with no newline.
      await write(proc, '{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"');
      const refused = next((m) => m.error?.code === -32600);
      const chunk = 'A'.repeat(256 * 1024);
      for (let i = 0; i < 128; i++) await write(proc, chunk);
      const err = await refused;
      expect(err.id).toBeNull();
      expect(err.error.message).toContain(`over the ${LIMIT}-byte limit`);
      expect(err.error.data).toEqual({ maxBytes: LIMIT });
      // Still the same line: the id inside it is never answered; the next line is served.
      await write(proc, `"}}\n${JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ping' })}\n`);
      expect((await next((m) => m.id === 3)).result).toEqual({});
      // An over-long line that does end: one error, then service as usual.
      await write(proc, `${JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'ping', params: { pad: 'B'.repeat(LIMIT) } })}\n${JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list' })}\n`);
      expect((await next((m) => m.id === 5)).result.tools.length).toBeGreaterThan(0);
      // Alive and answering after all of it: one more round trip rather than a pause.
      await write(proc, `${JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'ping' })}\n`);
      expect((await next((m) => m.id === 6)).result).toEqual({});
      expect(proc.exitCode).toBeNull();
      expect(stderr()).not.toMatch(/heap|RangeError|Error:/);
    } finally {
      proc.stdin!.end();
      await new Promise((r) => proc.once('exit', r));
    }
  });

  it('a bad FUSION_MCP_MAX_MESSAGE_BYTES is invalid_config naming the variable', async () => {
    const { proc, stderr } = startMcp(d.socket, { FUSION_MCP_MAX_MESSAGE_BYTES: 'lots' });
    const code = await new Promise<number | null>((r) => proc.once('exit', r));
    expect(code).not.toBe(0);
    expect(stderr()).toContain('FUSION_MCP_MAX_MESSAGE_BYTES must be a positive integer');
  });
});
