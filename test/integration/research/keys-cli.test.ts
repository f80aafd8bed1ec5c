/**
 * `fusion keys` and the daemon's research flags through the real CLI (dist build): the key is
 * printed once, alone on stdout; the store holds only its sha256; `list` shows no secret; a
 * revoked key gets 401 from a running daemon. `--listen` refuses a non-loopback address without
 * `--listen-public`; `--research-store memory` warns at start-up.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../daemon/helpers.js';
import { api, tempHome } from './helpers.js';

const CLI = join(ROOT, 'dist', 'src', 'cli', 'main.js');
const cli = (args: string[], env: Record<string, string> = {}): { code: number | null; stdout: string; stderr: string } => {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};

async function startCliDaemon(args: string[]): Promise<{ proc: ChildProcess; base: string; stderr: () => string }> {
  const proc = spawn(process.execPath, [CLI, 'daemon', '--sandbox', 'bwrap', '--log-level', 'warn', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  const base = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`daemon did not start: ${err}`)), 30_000);
    proc.stderr!.on('data', (c: Buffer) => {
      err += c.toString();
      const m = /research API listening on (http:\/\/\S+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`daemon exited with ${String(code)}: ${err}`));
    });
  });
  return { proc, base, stderr: () => err };
}

const procs: ChildProcess[] = [];
afterAll(async () => {
  for (const p of procs) {
    if (p.exitCode === null && p.signalCode === null) {
      const exited = new Promise((r) => p.once('exit', r));
      p.kill('SIGTERM');
      await exited;
    }
  }
});

describe('fusion keys', () => {
  it('create prints the key once, stores only its digest; list shows no secret; revoke makes it 401', async () => {
    const home = tempHome('fusion-keys-');
    const created = cli(['keys', 'create', '--workspace', 'ws_cli', '--kind', 'workspace', '--data', home]);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/^fsk_key_[0-9a-f]{16}_[A-Za-z0-9_-]{43}\n$/);
    const key = created.stdout.trim();
    const id = /^fsk_(key_[0-9a-f]{16})_/.exec(key)![1]!;
    expect(created.stderr).toContain(id);
    expect(created.stderr).not.toContain(key);

    const listed = cli(['keys', 'list', '--json', '--data', home]);
    expect(listed.code).toBe(0);
    const keys = JSON.parse(listed.stdout).keys as Array<Record<string, unknown>>;
    expect(keys).toEqual([{ id, workspaceId: 'ws_cli', kind: 'workspace', createdAt: expect.any(String), revokedAt: null }]);
    expect(listed.stdout).not.toContain(key);
    expect(cli(['keys', 'list', '--data', home]).stdout).toContain(id);
    // Nothing on disk holds the key; the digest is there.
    const secret = /^fsk_key_[0-9a-f]{16}_(.+)$/.exec(key)![1]!;
    const digest = createHash('sha256').update(key).digest('hex');
    const disk = readdirSync(home).filter((f) => f.startsWith('fusion.db')).map((f) => readFileSync(join(home, f)).toString('latin1')).join('');
    expect(disk).not.toContain(secret);
    expect(disk).toContain(digest);

    const d = await startCliDaemon(['--data', home, '--listen', '127.0.0.1:0']);
    procs.push(d.proc);
    const create = (): Promise<{ status: number; body: any }> => api(d.base, 'POST', '/api/v1/research', { key, idem: 'cli-1', body: { query: 'q', sourceUrls: ['http://127.0.0.1:9/'] } });
    const first = await create();
    expect(first.status).toBe(202);
    expect(first.body.run.status).toBe('failed');
    const revoked = cli(['keys', 'revoke', id, '--data', home]);
    expect(revoked.code).toBe(0);
    expect((await create()).status).toBe(401);
    expect(JSON.parse(cli(['keys', 'list', '--json', '--data', home]).stdout).keys[0].revokedAt).toEqual(expect.any(String));
    expect(cli(['keys', 'revoke', 'key_0000000000000000', '--data', home]).code).toBe(1);
  });

  it('refuses bad usage with exit 2', () => {
    const home = tempHome('fusion-keys-');
    expect(cli(['keys', 'create', '--workspace', 'ws', '--kind', 'admin', '--data', home]).code).toBe(2);
    expect(cli(['keys', 'create', '--kind', 'workspace', '--data', home]).code).toBe(2);
    expect(cli(['keys', 'create', '--workspace', 'bad ws', '--kind', 'workspace', '--data', home]).code).toBe(2);
    expect(cli(['keys', 'frobnicate', '--data', home]).code).toBe(2);
  });
});

describe('daemon research flags', () => {
  it('--listen refuses a non-loopback address without --listen-public, and says why', () => {
    const home = tempHome('fusion-listen-');
    const r = cli(['daemon', '--sandbox', 'bwrap', '--data', home, '--listen', '0.0.0.0:0'], { FUSION_LOG_LEVEL: 'silent' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/refusing to listen on 0\.0\.0\.0/);
    expect(r.stderr).toMatch(/plain HTTP \(no TLS\)/);
    expect(r.stderr).toMatch(/--listen-public/);
    expect(cli(['daemon', '--data', home, '--listen', 'example.com:80']).stderr).toMatch(/IP address or localhost/);
  });

  it('--research-store memory warns at start-up that runs are lost on restart', async () => {
    const home = tempHome('fusion-memory-');
    const d = await startCliDaemon(['--data', home, '--listen', '127.0.0.1:0', '--research-store', 'memory', '--research-user-agent', 'ExampleBot/1.0']);
    procs.push(d.proc);
    expect(d.stderr()).toMatch(/research runs are lost when this daemon stops/);
    await new Promise((r) => setTimeout(r, 200));
    expect(d.stderr()).toMatch(/research runs are kept in memory only/);
  });
});
