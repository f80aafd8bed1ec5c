/**
 * The start-up log says each thing once: the model roster and the dashboard's address are each
 * one line (a reader counting lines, or grepping them, sees no duplicate with another key).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { buildConfig, startDaemon } from '../../../src/main.js';
import { createLogger } from '../../../src/log.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const runner = { run: () => Promise.reject(new Error('no task runs in this test')) };

describe('daemon start-up log', () => {
  it('logs the model roster once and the dashboard listening once', async () => {
    const base = mkdtempSync(join(tmpdir(), 'fusion-startlog-'));
    dirs.push(base);
    const lines: Array<Record<string, unknown>> = [];
    const destination = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString('utf8').split('\n')) if (l.trim() !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
        done();
      },
    });
    const config = buildConfig({ home: join(base, 'home'), socketPath: join(base, 'fusion.sock'), logLevel: 'info', dashboard: '127.0.0.1:0' });
    const daemon = await startDaemon(config, { log: createLogger({ level: 'info', destination }), runner, workflow: { runRoot: join(base, 'run') } });
    await daemon.close();
    const msgs = lines.map((l) => String(l.msg));
    expect(msgs.filter((m) => /roster/u.test(m)), msgs.join('\n')).toHaveLength(1);
    expect(msgs.filter((m) => /dashboard listening/u.test(m)), msgs.join('\n')).toHaveLength(1);
  }, 60_000);
});
