/**
 * `make status` (scripts/admin.mjs status) is a short summary a person reads (daemon line, one
 * line per health part, the newest tasks as a table); `make status-json` is the full reply.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startStubDaemon, stopDaemon, tempHome, type DaemonProc } from '../daemon/helpers.js';

describe('make status', () => {
  let d: DaemonProc;
  beforeAll(async () => {
    d = await startStubDaemon(tempHome(), 10);
  });
  afterAll(async () => {
    if (d) await stopDaemon(d);
  });
  const admin = (...args: string[]): { code: number | null; stdout: string } => {
    const r = spawnSync(process.execPath, [join(ROOT, 'scripts', 'admin.mjs'), ...args], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, FUSION_SOCKET: d.socket } });
    return { code: r.status, stdout: r.stdout };
  };

  it('is a short human summary; --json is the full dump', () => {
    const r = admin('status');
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^daemon ok: version \S+, up \d+s, socket /u);
    expect(r.stdout).toMatch(/^ {2}database: ok true/mu);
    expect(r.stdout).not.toContain('{');
    expect(lines.length).toBeLessThan(20);
    // The sandbox line names the image (none outside Docker); no part prints an empty line.
    expect(r.stdout).toMatch(/^ {2}sandbox: .*image \S+/mu);
    expect(r.stdout).toMatch(/^ {2}egress: resolve none, allowCidrs none$/mu);
    expect(lines.filter((l) => /^ {2}\w+: ?$/u.test(l))).toEqual([]);
    // Models by their ids: the three candidates, the evaluator and the merger (objects were
    // once printed as `[object Object]` and the evaluator and merger dropped).
    expect(r.stdout).not.toContain('[object Object]');
    expect(r.stdout).toMatch(/^ {2}providers: .*candidates builtin:\S+ builtin:\S+ builtin:\S+, evaluator builtin:\S+, merger builtin:\S+/mu);
    const json = JSON.parse(admin('status', '--json').stdout) as { health: { ok: boolean }; tasks: unknown[] };
    expect(json.health.ok).toBe(true);
    expect(Array.isArray(json.tasks)).toBe(true);
  });

  it('with no daemon: exit 3 and how to start one, without the task-only --wait hint', () => {
    const r = spawnSync(process.execPath, [join(ROOT, 'scripts', 'admin.mjs'), 'run', 'reaper'], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, FUSION_SOCKET: `${d.socket}.absent` } });
    expect(r.status).toBe(3);
    expect(r.stderr).toMatch(/^admin: daemon_unavailable: no fusion daemon answers on \S+\.absent; .*make daemon/u);
    expect(r.stderr).not.toContain('--wait');
  });

  it('ends quietly when its reader goes away (make status | head)', () => {
    // `true` exits at once, before the summary is written: every write then fails with EPIPE.
    const r = spawnSync('bash', ['-o', 'pipefail', '-c', `"${process.execPath}" "${join(ROOT, 'scripts', 'admin.mjs')}" status | true`], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, FUSION_SOCKET: d.socket } });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });
});
