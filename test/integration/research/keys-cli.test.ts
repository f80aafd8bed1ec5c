/**
 * `fusion keys` and the daemon's research flags through the real CLI (dist build): the key is
 * printed once, alone on stdout; the store holds only its sha256; `list` shows no secret; a
 * revoked key gets 401 from a running daemon. `--listen` refuses a non-loopback address without
 * `--listen-public`; `--research-store memory` warns at start-up.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli, startCli, type Started } from '../../helpers/cli.js';
import { api, tempHome } from './helpers.js';

/** `fusion daemon` with a research listener, once it says where it listens. */
async function startCliDaemon(args: string[]): Promise<{ started: Started; base: string; stderr: () => string }> {
  const daemon = startCli(['daemon', '--sandbox', 'bwrap', '--log-level', 'warn', ...args]);
  daemons.push(daemon);
  const [, base] = await daemon.waitForText('stderr', /research API listening on (http:\/\/\S+)/, 'the daemon to start');
  return { started: daemon, base: base!, stderr: daemon.stderr };
}

const daemons: Started[] = [];
afterAll(async () => {
  for (const d of daemons) await d.stop();
});

describe('fusion keys', () => {
  it('create prints the key once, stores only its digest; list shows no secret; revoke makes it 401', async () => {
    const home = tempHome('fusion-keys-');
    const created = runCli(['keys', 'create', '--workspace', 'ws_cli', '--kind', 'workspace', '--data', home]);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/^fsk_key_[0-9a-f]{16}_[A-Za-z0-9_-]{43}\n$/);
    const key = created.stdout.trim();
    const id = /^fsk_(key_[0-9a-f]{16})_/.exec(key)![1]!;
    expect(created.stderr).toContain(id);
    expect(created.stderr).not.toContain(key);

    const listed = runCli(['keys', 'list', '--json', '--data', home]);
    expect(listed.code).toBe(0);
    const keys = JSON.parse(listed.stdout).keys as Array<Record<string, unknown>>;
    expect(keys).toEqual([{ id, workspaceId: 'ws_cli', kind: 'workspace', createdAt: expect.any(String), revokedAt: null }]);
    expect(listed.stdout).not.toContain(key);
    expect(runCli(['keys', 'list', '--data', home]).stdout).toContain(id);
    // Nothing on disk holds the key; the digest is there.
    const secret = /^fsk_key_[0-9a-f]{16}_(.+)$/.exec(key)![1]!;
    const digest = createHash('sha256').update(key).digest('hex');
    const disk = readdirSync(home).filter((f) => f.startsWith('fusion.db')).map((f) => readFileSync(join(home, f)).toString('latin1')).join('');
    expect(disk).not.toContain(secret);
    expect(disk).toContain(digest);

    const d = await startCliDaemon(['--data', home, '--listen', '127.0.0.1:0']);
    const create = (): Promise<{ status: number; body: any }> => api(d.base, 'POST', '/api/v1/research', { key, idem: 'cli-1', body: { query: 'q', sourceUrls: ['http://127.0.0.1:9/'] } });
    const first = await create();
    expect(first.status).toBe(202);
    expect(first.body.run.status).toBe('failed');
    const revoked = runCli(['keys', 'revoke', id, '--data', home]);
    expect(revoked.code).toBe(0);
    expect((await create()).status).toBe(401);
    expect(JSON.parse(runCli(['keys', 'list', '--json', '--data', home]).stdout).keys[0].revokedAt).toEqual(expect.any(String));
    expect(runCli(['keys', 'revoke', 'key_0000000000000000', '--data', home]).code).toBe(1);
  });

  it('refuses bad usage with exit 2', () => {
    const home = tempHome('fusion-keys-');
    expect(runCli(['keys', 'create', '--workspace', 'ws', '--kind', 'admin', '--data', home]).code).toBe(2);
    expect(runCli(['keys', 'create', '--kind', 'workspace', '--data', home]).code).toBe(2);
    expect(runCli(['keys', 'create', '--workspace', 'bad ws', '--kind', 'workspace', '--data', home]).code).toBe(2);
    expect(runCli(['keys', 'frobnicate', '--data', home]).code).toBe(2);
  });
});

describe('daemon research flags', () => {
  it('--listen refuses a non-loopback address without --listen-public, and says why', () => {
    const home = tempHome('fusion-listen-');
    const r = runCli(['daemon', '--sandbox', 'bwrap', '--data', home, '--listen', '0.0.0.0:0'], { FUSION_LOG_LEVEL: 'silent' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/refusing to listen on 0\.0\.0\.0/);
    expect(r.stderr).toMatch(/plain HTTP \(no TLS\)/);
    expect(r.stderr).toMatch(/--listen-public/);
    expect(runCli(['daemon', '--data', home, '--listen', 'example.com:80']).stderr).toMatch(/IP address or localhost/);
  });

  it('--research-store memory warns at start-up that runs are lost on restart', async () => {
    const home = tempHome('fusion-memory-');
    const d = await startCliDaemon(['--data', home, '--listen', '127.0.0.1:0', '--research-store', 'memory', '--research-user-agent', 'ExampleBot/1.0']);
    expect(d.stderr()).toMatch(/research runs are lost when this daemon stops/);
    await d.started.waitForText('stderr', /research runs are kept in memory only/, 'the memory-store notice');
  });
});
