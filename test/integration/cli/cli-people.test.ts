/**
 * The CLI for a person at a terminal, against a real daemon (stub workflow): a submit without
 * --wait prints the id and how to follow it; `fusion tasks` is a table and `--json` the
 * daemon's reply; `fusion logs ID` prints the task's events; `--wait` shows elapsed time,
 * candidate tool-call counts and a heartbeat while silent; `fusion tasks --watch` redraws as the
 * task moves. MCP: a submission with a progressToken gets notifications/progress for it.
 */
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startStubDaemon, stopDaemon, tempHome, type DaemonProc } from '../daemon/helpers.js';
import { startMcp } from '../mcp/mcp-process.js';

const CLI = join(ROOT, 'dist', 'src', 'cli', 'main.js');
const REPO = join(ROOT, 'test', 'fixtures', 'builtin-repo');
const OBJECTIVE = 'Find where the token bucket refills its tokens after a pause';
const SUBMIT = ['investigate', '--objective', OBJECTIVE, '--background', 'Bursts after a pause', '--deliverable', 'The file and lines', '--repo', REPO];

describe('fusion CLI output for people', () => {
  let d: DaemonProc;
  beforeAll(async () => {
    d = await startStubDaemon(tempHome(), 1500, 0, {}, { FUSION_STUB_ACTIVITY: '1' });
  });
  afterAll(async () => {
    if (d) await stopDaemon(d);
  });
  const fusion = (args: string[], env: Record<string, string> = {}): { code: number | null; stdout: string; stderr: string } => {
    const r = spawnSync(process.execPath, [CLI, ...args, '--socket', d.socket], { encoding: 'utf8', timeout: 120_000, env: { ...process.env, ...env } });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };

  let taskId = '';
  it('a submit without --wait prints the id and how to follow it, no agent instructions', () => {
    const r = fusion(SUBMIT);
    expect(r.code, r.stderr).toBe(0);
    taskId = /^Submitted (investigate-[0-9a-f]{32}) /u.exec(r.stdout)?.[1] ?? '';
    expect(taskId).not.toBe('');
    expect(r.stdout).toContain(`fusion logs ${taskId} --follow`);
    expect(r.stdout).not.toMatch(/bg_result|Do not poll/u);
  });

  it('fusion tasks is a table with the objective and caller; --json is the daemon reply', () => {
    const r = fusion(['tasks']);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID\s+STATE\s+AGE\s+DURATION\s+OBJECTIVE\s+CALLER$/u);
    const row = lines.find((l) => l.startsWith(taskId));
    expect(row).toBeDefined();
    expect(row).toContain('Find where the token');
    expect(row).toMatch(/ root$/u);
    const json = JSON.parse(fusion(['tasks', '--json']).stdout) as { tasks: Array<{ taskId: string; objective: string }> };
    expect(json.tasks.find((t) => t.taskId === taskId)?.objective).toBe(OBJECTIVE);
  });

  it('--wait shows elapsed time, the candidate\'s tool calls and a heartbeat while the task is silent', () => {
    const r = fusion([...SUBMIT, '--wait'], { FUSION_PROGRESS_HEARTBEAT_S: '1' });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^Submitted investigate-[0-9a-f]{32}; following its progress/mu);
    expect(r.stderr).toMatch(/^\[\+\d+s\] [a-z_]+ → candidates_running$/mu);
    expect(r.stderr).toMatch(/^\[\+\d+s\] {3}candidate-1: 3 tool calls so far$/mu);
    expect(r.stderr).toMatch(/^\[\+\d+s\] {3}candidate-1 attempt 1 succeeded \(5 tool calls\)$/mu);
    // Stages of 1.5 s with a 1 s heartbeat: at least one "still …" line.
    expect(r.stderr).toMatch(/^\[\+\d+s\] still [a-z_]+.*; last event \d+s ago$/mu);
    expect(r.stderr).not.toMatch(/bg_result|Do not poll/u);
  });

  it('fusion logs ID prints the task\'s events with elapsed time; --json as NDJSON', () => {
    const done = fusion(['wait', taskId, '--timeout', '120']);
    expect(done.code, done.stderr).toBe(0);
    const r = fusion(['logs', taskId]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n')[0]).toContain(`${taskId} (investigate) created `);
    expect(r.stdout).toMatch(/^\[\+\d+s\] candidates_running → candidates_complete$/mu);
    expect(r.stdout).toMatch(/candidate-1 attempt 1 succeeded \(5 tool calls\)/u);
    expect(r.stdout).toMatch(/completed/u);
    const ndjson = fusion(['logs', taskId, '--json']).stdout.trim().split('\n').map((l) => JSON.parse(l) as { kind: string });
    expect(ndjson.at(-1)?.kind).toBe('terminal');
  });

  it('fusion tasks --watch redraws as a new task moves until it is completed', async () => {
    const watcher = spawn(process.execPath, [CLI, 'tasks', '--watch', '--socket', d.socket], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const seen = (re: RegExp): Promise<void> =>
      new Promise((resolve) => {
        const check = (): void => {
          if (re.test(out)) {
            watcher.stdout.off('data', onData);
            resolve();
          }
        };
        const onData = (c: Buffer): void => {
          out += c.toString();
          check();
        };
        watcher.stdout.on('data', onData);
        check();
      });
    try {
      await seen(/^ID\s+STATE/mu);
      const submitted = fusion(SUBMIT);
      const id = /^Submitted (investigate-[0-9a-f]{32}) /u.exec(submitted.stdout)?.[1] ?? '';
      await seen(new RegExp(`^${id}  candidates_running`, 'mu'));
      await seen(new RegExp(`^${id}  completed`, 'mu'));
    } finally {
      watcher.kill('SIGTERM');
    }
  }, 120_000);

  it('MCP: a submission with a progressToken gets notifications/progress for it, increasing, until it ends', async () => {
    const { proc, next } = startMcp(d.socket);
    const progress: Array<{ progress: number; message: string }> = [];
    try {
      proc.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '0' } } })}\n`);
      await next((m) => m.id === 1);
      const args = { objective: OBJECTIVE, background: ['Bursts'], deliverable: 'The file' };
      proc.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'fusion_investigate', arguments: args, _meta: { progressToken: 'tok-1' } } })}\n`);
      const reply = await next((m) => m.id === 2);
      const id = reply.result.structuredContent.taskId as string;
      await next((m) => {
        if (m.method === 'notifications/progress' && m.params.progressToken === 'tok-1') progress.push(m.params);
        return m.method === 'notifications/message' && m.params.data.taskId === id;
      });
      await next((m) => m.method === 'notifications/progress' && /completed/u.test(m.params.message));
    } finally {
      proc.stdin!.end();
      await new Promise((r) => proc.once('exit', r));
    }
    const messages = progress.map((p) => p.message);
    expect(messages.some((m) => /→ candidates_running$/u.test(m))).toBe(true);
    expect(messages.some((m) => /candidate-1: 3 tool calls so far$/u.test(m))).toBe(true);
    const counters = progress.map((p) => p.progress);
    expect(counters).toEqual([...counters].sort((a, b) => a - b));
    expect(new Set(counters).size).toBe(counters.length);
  }, 120_000);
});
