/**
 * A user outside a --socket-group daemon's group (docs/operations.md#agent-accounts), with real
 * users and groups made for the test: the CLI finds the shared socket with no settings, says
 * the daemon runs but this user is not in its group (naming the group and the usermod command)
 * and never starts an embedded daemon as that user, `--wait` or not. A user the group
 * database lists but whose session lacks the group is told to log in again.
 *
 * The shared socket's default path (/run/fusion/fusion.sock) is the real one: each run gets a
 * private mount namespace with a tmpfs on /run, so no other test or daemon is touched.
 * Needs root (useradd, setpriv, unshare); skips loudly elsewhere, fails under CI=true.
 */
import { execFileSync } from 'node:child_process';
import { runCommand } from '../../helpers/cli.js';
import { ROOT, describeUnless, missingPrerequisite } from '../../helpers/gates.js';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { addTestUser, removeTestUsers } from '../../helpers/test-users.js';

/** The submit flags, over the fixture repository as the users see it (through the bind mount). */
const ARGS = (): string[] => ['--objective', 'Find where tokens are refilled', '--background', 'Bursts after a pause', '--deliverable', 'The file and lines', '--repo', join(viewDir, 'test', 'fixtures', 'builtin-repo')];

const sh = (cmd: string, ...args: string[]): string => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/** A daemon stand-in: answers every request 200 (a user who reached it would be told nothing was wrong). */
const SERVER = "require('node:http').createServer((q,s)=>{s.setHeader('content-type','application/json');s.end('{\"ok\":true}')}).listen('/run/fusion/fusion.sock')";

/**
 * In a private mount namespace with a fresh /run: a socket at /run/fusion/fusion.sock in a
 * 0750 directory of `group`, then `argv` run as `user` (its `setpriv` group options).
 */
/** Where the package is bind-mounted for the users (set up by the suite). */
let viewDir = '';
const cliView = (): string => join(viewDir, 'dist', 'src', 'cli', 'main.js');

function asUserBesideSharedSocket(group: string, setprivArgs: string[], env: Record<string, string>, argv: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const script = [
    'set -e',
    'mount -t tmpfs -o mode=0755 tmpfs /run',
    // The package at a path every user can read (the clone may sit under a 0700 home).
    'mount --bind "$PKG" "$VIEW"',
    'mkdir -m 0750 /run/fusion',
    'chgrp "$G" /run/fusion',
    '"$NODE" -e "$SERVER" & server=$!',
    // Waits on the socket itself (a state), not on time.
    'while [ ! -S /run/fusion/fusion.sock ]; do kill -0 $server; sleep 0.05; done',
    'chgrp "$G" /run/fusion/fusion.sock && chmod 0660 /run/fusion/fusion.sock',
    'set +e',
    `setpriv ${setprivArgs.join(' ')} -- env ${Object.entries(env).map(([k, v]) => `${k}=${v}`).join(' ')} "$@"`,
    'code=$?',
    'kill $server',
    'exit $code',
  ].join('\n');
  return runCommand('unshare', ['--mount', '--propagation', 'private', '--', '/bin/sh', '-c', script, 'sh', ...argv], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', G: group, NODE: process.execPath, SERVER, PKG: ROOT, VIEW: viewDir },
    cleanEnv: true,
    timeoutMs: 120_000,
  });
}

// Needs root for useradd, setpriv and unshare (test/helpers/gates.ts).
describeUnless(missingPrerequisite({ root: true }), 'a user outside the socket group', () => {
  const tag = randomBytes(3).toString('hex');
  const group = `fdg${tag}`;
  const outsider = `fdo${tag}`;
  const stale = `fds${tag}`;
  let base = '';

  beforeAll(() => {
    sh('groupadd', group);
    addTestUser(outsider);
    // Listed in the group database, but the session below is started without it.
    addTestUser(stale, [group]);
    base = mkdtempSync(join(tmpdir(), 'fusion-denied-'));
    chmodSync(base, 0o755);
    viewDir = join(base, 'view');
    mkdirSync(viewDir, { mode: 0o755 });
    for (const user of [outsider, stale]) {
      mkdirSync(join(base, user), { mode: 0o700 });
      sh('chown', `${user}:${user}`, join(base, user));
    }
  });

  afterAll(() => {
    removeTestUsers([outsider, stale], [group]);
    if (base !== '') rmSync(base, { recursive: true, force: true });
  });

  const env = (user: string): Record<string, string> => ({ HOME: join(base, user), PATH: process.env.PATH ?? '/usr/bin:/bin', FUSION_LOG_LEVEL: 'warn' });

  it('investigate --wait says the daemon runs but the user is not in its group, names the usermod fix, and starts no embedded daemon', async () => {
    const r = await asUserBesideSharedSocket(group, [`--reuid=${outsider}`, `--regid=${outsider}`, '--init-groups'], env(outsider), [process.execPath, cliView(), 'investigate', ...ARGS(), '--wait']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr.trim()).toBe(
      `fusion: forbidden: the fusion daemon at /run/fusion/fusion.sock runs, but its directory /run/fusion admits only the daemon's user and group ${group}, and ${outsider} is not in ${group}; ` +
        `ask an admin: sudo usermod -aG ${group} ${outsider} (then log in again). Starting a daemon of your own would not reach that one`,
    );
    expect(r.stderr).not.toMatch(/embedded|sandbox_unavailable|daemon_unavailable/u);
    // No embedded daemon made a data directory in the user's home.
    expect(existsSync(join(base, outsider, '.local'))).toBe(false);
  });

  it('tasks (no --wait) gets the same diagnosis, not "no daemon answers"', async () => {
    const r = await asUserBesideSharedSocket(group, [`--reuid=${outsider}`, `--regid=${outsider}`, '--init-groups'], env(outsider), [process.execPath, cliView(), 'tasks']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`sudo usermod -aG ${group} ${outsider}`);
  });

  it('a user the group lists, in a session started before that, is told to log in again', async () => {
    const r = await asUserBesideSharedSocket(group, [`--reuid=${stale}`, `--regid=${stale}`, '--clear-groups'], env(stale), [process.execPath, cliView(), 'investigate', ...ARGS(), '--wait']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`${stale} is listed in its group ${group}, but this login session started before that: log in again (or run 'newgrp ${group}')`);
    expect(existsSync(join(base, stale, '.local'))).toBe(false);
  });
});
