/**
 * Which socket a client and a daemon use (src/config/settings.ts): a client with no --socket or
 * FUSION_SOCKET uses its own home's socket, or the shared one of a --socket-group daemon when
 * only that exists (an agent account needs no settings) and no data directory was named; a
 * daemon never discovers another's.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseArgs } from '../../../src/config/args.js';
import { daemonConfigInput, resolveDaemonSocket, resolveSocket, SHARED_SOCKET } from '../../../src/config/settings.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});
const NO_ARGS = parseArgs([], {});
const args = (argv: string[]) => parseArgs(argv, { socket: { value: true }, 'socket-group': { value: true } });

async function listening(path: string): Promise<void> {
  const server: Server = createServer();
  await new Promise<void>((r) => server.listen(path, r));
  cleanups.push(() => server.close());
}

describe('socket discovery', () => {
  it('a client uses its own socket when it exists, else the shared one when that exists, else its own', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fusion-sockdisc-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    // The default home (no FUSION_HOME, no --data): $XDG_STATE_HOME/fusion.
    const home = join(dir, 'fusion');
    const shared = join(dir, 'shared.sock');
    const env = { XDG_STATE_HOME: dir };
    expect(resolveSocket(NO_ARGS, env, shared)).toBe(join(home, 'fusion.sock'));
    await listening(shared);
    expect(resolveSocket(NO_ARGS, env, shared)).toBe(shared);
    mkdirSync(home);
    await listening(join(home, 'fusion.sock'));
    expect(resolveSocket(NO_ARGS, env, shared)).toBe(join(home, 'fusion.sock'));
    // Explicit settings always win.
    expect(resolveSocket(NO_ARGS, { ...env, FUSION_SOCKET: '/x/y.sock' }, shared)).toBe('/x/y.sock');
    expect(resolveSocket(args(['--socket', '/a/b.sock']), env, shared)).toBe('/a/b.sock');
  });

  it('an explicit data directory (FUSION_HOME or --data) means its own daemon or none, never the shared one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fusion-sockdisc-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const shared = join(dir, 'shared.sock');
    await listening(shared);
    const other = join(dir, 'other-home');
    // No socket in the explicit home: still that home's path (connecting then says no daemon answers there).
    expect(resolveSocket(NO_ARGS, { FUSION_HOME: other }, shared)).toBe(join(other, 'fusion.sock'));
    expect(resolveSocket(parseArgs(['--data', other], { data: { value: true } }), { XDG_STATE_HOME: dir }, shared)).toBe(join(other, 'fusion.sock'));
    // Without one, the shared daemon is still found (a local agent account needs no settings).
    expect(resolveSocket(NO_ARGS, { XDG_STATE_HOME: dir }, shared)).toBe(shared);
  });

  it("an explicit data directory's daemon is found by the socket its live owner recorded (a --socket-group daemon listens outside it)", () => {
    const dir = mkdtempSync(join(tmpdir(), 'fusion-sockdisc-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const home = join(dir, 'home');
    mkdirSync(home, { mode: 0o700 });
    const record = join(home, 'daemon.json');
    const recorded = '/run/fusion-test/fusion.sock';
    const write = (pid: number, socket = recorded) => writeFileSync(record, JSON.stringify({ pid, socket, startedAt: '' }), { mode: 0o600 });
    const env = { FUSION_HOME: home };
    write(process.pid);
    expect(resolveSocket(NO_ARGS, env)).toBe(recorded);
    expect(resolveSocket(parseArgs(['--data', home], { data: { value: true } }), {})).toBe(recorded);
    // --socket / FUSION_SOCKET still win.
    expect(resolveSocket(NO_ARGS, { ...env, FUSION_SOCKET: '/x/y.sock' })).toBe('/x/y.sock');
    // A dead owner's record (killed with SIGKILL) is not followed.
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    write(Number(dead.stdout));
    expect(resolveSocket(NO_ARGS, env)).toBe(join(home, 'fusion.sock'));
    // A record others may write, or a link, is not followed.
    write(process.pid);
    chmodSync(record, 0o622);
    expect(resolveSocket(NO_ARGS, env)).toBe(join(home, 'fusion.sock'));
    rmSync(record);
    const elsewhere = join(dir, 'planted.json');
    writeFileSync(elsewhere, JSON.stringify({ pid: process.pid, socket: recorded }), { mode: 0o600 });
    symlinkSync(elsewhere, record);
    expect(resolveSocket(NO_ARGS, env)).toBe(join(home, 'fusion.sock'));
    // A relative socket path is not followed either.
    rmSync(record);
    write(process.pid, 'x.sock');
    expect(resolveSocket(NO_ARGS, env)).toBe(join(home, 'fusion.sock'));
  });

  it('a daemon listens on its home socket, or on the shared path with --socket-group', () => {
    const env = { FUSION_HOME: '/srv/fusion' };
    expect(resolveDaemonSocket(NO_ARGS, env)).toBe('/srv/fusion/fusion.sock');
    expect(resolveDaemonSocket(args(['--socket-group', 'agents']), env)).toBe(SHARED_SOCKET);
    expect(resolveDaemonSocket(NO_ARGS, { ...env, FUSION_SOCKET_GROUP: 'agents' })).toBe(SHARED_SOCKET);
    expect(resolveDaemonSocket(args(['--socket-group', 'agents', '--socket', '/run/x/f.sock']), env)).toBe('/run/x/f.sock');
    expect(daemonConfigInput(args(['--socket-group', 'agents']), env)).toMatchObject({ socketGroup: 'agents', socketPath: SHARED_SOCKET });
    expect(daemonConfigInput(NO_ARGS, env)).not.toHaveProperty('socketGroup');
  });
});
