/**
 * A non-root user's first `--wait` with no daemon running (docs/operations.md#agent-accounts):
 * the CLI says first, in one line, what an embedded daemon's sandboxes need from this account;
 * when none is usable (here: Docker, and the user is not in the docker group) the error is
 * printed once, as plain text, with no JSON log lines around it.
 *
 * A real user made for the test; the package is bind-mounted where that user can read it in a
 * private mount namespace. Needs root (useradd, setpriv, unshare); skips loudly elsewhere.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runCommand } from '../../helpers/cli.js';
import { ROOT, describeUnless, missingPrerequisite } from '../../helpers/gates.js';
import { addTestUser, removeTestUsers } from '../../helpers/test-users.js';

describeUnless(missingPrerequisite({ root: true }), 'an embedded --wait daemon started by a non-root user', () => {
  const user = `fen${randomBytes(3).toString('hex')}`;
  let base = '';

  beforeAll(() => {
    addTestUser(user);
    base = mkdtempSync(join(tmpdir(), 'fusion-nonroot-'));
    chmodSync(base, 0o755);
    mkdirSync(join(base, 'view'), { mode: 0o755 });
    mkdirSync(join(base, 'home'), { mode: 0o700 });
    execFileSync('chown', [`${user}:${user}`, join(base, 'home')]);
  });

  afterAll(() => {
    removeTestUsers([user]);
    if (base !== '') rmSync(base, { recursive: true, force: true });
  });

  it('names what the sandboxes need first, then the sandbox error once, as plain text', async () => {
    const view = join(base, 'view');
    const uid = Number(execFileSync('id', ['-u', user], { encoding: 'utf8' }).trim());
    const args = ['investigate', '--objective', 'Find where tokens are refilled', '--background', 'Bursts', '--deliverable', 'The file', '--repo', join(view, 'test', 'fixtures', 'builtin-repo'), '--data', join(base, 'home', 'fusion'), '--sandbox', 'docker', '--wait'];
    const script = ['set -e', 'mount --bind "$PKG" "$VIEW"', 'set +e', `setpriv --reuid=${user} --regid=${user} --init-groups -- env HOME=${join(base, 'home')} PATH=/usr/bin:/bin "$NODE" "$VIEW/dist/src/cli/main.js" "$@"`].join('\n');
    const r = await runCommand('unshare', ['--mount', '--propagation', 'private', '--', '/bin/sh', '-c', script, 'sh', ...args], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', NODE: process.execPath, PKG: ROOT, VIEW: view },
      cleanEnv: true,
      timeoutMs: 120_000,
    });
    const all = `${r.stdout}${r.stderr}`;
    expect(r.code, all).toBe(1);
    expect(r.stderr.split('\n')[0]).toBe(`the embedded daemon runs as uid ${uid}: bwrap needs a delegated cgroup or the rlimit mode (FUSION_SANDBOX_RLIMIT=1), Docker needs the docker group`);
    expect(all, all).toContain('sandbox_unavailable');
    // The backend's reason, once: not again in a JSON log line or a cut-down progress line.
    expect(all.split('no sandbox backend is usable').length - 1, all).toBe(1);
    expect(all, all).not.toMatch(/^\{"level"/mu);
  });
});
