import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INVESTIGATE_ARGS, startStubDaemon, stopDaemon, tempHome, type DaemonProc } from '../daemon/helpers.js';
import { startMcp } from './mcp-process.js';

describe('fusion mcp (stdio JSON-RPC)', () => {
  let d: DaemonProc;
  beforeAll(async () => {
    d = await startStubDaemon(tempHome(), 30);
  });
  afterAll(async () => {
    if (d) await stopDaemon(d);
  });

  it('lists the tools, submits a task, sends the terminal notification, and returns the verified result', async () => {
    const { proc, next } = startMcp(d.socket);
    let id = 0;
    const call = (method: string, params?: unknown): Promise<any> => {
      const myId = ++id;
      proc.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', id: myId, method, params })}\n`);
      return next((m) => m.id === myId);
    };
    try {
      const init = await call('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '0' } });
      expect(init.result.serverInfo.name).toBe('fusion');
      proc.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
      const list = await call('tools/list');
      expect(list.result.tools.map((t: any) => t.name)).toEqual(['fusion_investigate', 'fusion_research', 'bg_result', 'bg_status', 'bg_cancel', 'research_run', 'research_get', 'research_snapshots', 'research_list', 'web_read', 'web_crawl', 'web_search']);

      const bad = await call('tools/call', { name: 'fusion_investigate', arguments: { objective: 'x' } });
      expect(bad.result.isError).toBe(true);
      expect(bad.result.content[0].text).toBe('invalid_input: fusion_investigate missing required key(s): background, deliverable');

      const submitted = await call('tools/call', { name: 'fusion_investigate', arguments: INVESTIGATE_ARGS });
      const taskId = submitted.result.structuredContent.taskId;
      expect(submitted.result.content[0].text).toContain(`Started fusion investigate in the background (${taskId}).`);
      const note = await next((m) => m.method === 'notifications/message' && m.params.data.taskId === taskId);
      expect(note.params.data.status).toBe('completed');
      const result = await call('tools/call', { name: 'bg_result', arguments: { taskId } });
      expect(result.result.isError).toBe(false);
      expect(result.result.content[0].text).toMatch(/^Answer: \d+ bytes, sha256:[0-9a-f]{64} \(verified\)\./);
    } finally {
      proc.stdin!.end();
      await new Promise((r) => proc.once('exit', r));
    }
  });
});
