/**
 * What a non-root user is told when no sandbox backend is usable (src/launcher/select.ts with the
 * Docker and bwrap checks): the real causes and their fixes, never advice that cannot help.
 * Through the real CLI (`fusion sandbox exec`, the same launcher factories as the daemon) as
 * uid 65534, against this host's real Docker socket and cgroups:
 *   - a Docker socket the user may not open is "no access to Docker … docker group", not "engine
 *     not reachable … start dockerd / apt-get install docker.io";
 *   - an installed bwrap is never "install bubblewrap"; when the user has no writable cgroup the
 *     reason says so and names the rlimit mode (FUSION_SANDBOX_RLIMIT=1), which then works.
 * Needs root (setpriv, unshare), bwrap and a built dist/. The package is bind-mounted where uid
 * 65534 can read it, in a private mount namespace (a checkout under a 0700 home, as in CI).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { describeWithBwrap, ROOT } from '../../helpers/gates.js';

const NOBODY = 65534;
const DOCKER_SOCKET = '/var/run/docker.sock';

const scratch = mkdtempSync(join(tmpdir(), 'fsn-unavail-'));
chmodSync(scratch, 0o755);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Where uid 65534 sees the package: a checkout under a 0700 home (CI's) is bind-mounted here. */
const view = join(scratch, 'view');
mkdirSync(view, { mode: 0o755 });

function execAsNobody(backend: string, env: Record<string, string> = {}): { code: number | null; stderr: string } {
  const home = mkdtempSync(join(scratch, 'home-'));
  chmodSync(home, 0o777);
  // In a private mount namespace, so the bind is gone with the command.
  const script = [
    'set -e', 'mount --bind "$PKG" "$VIEW"', 'set +e',
    `exec /usr/bin/setpriv --reuid=${String(NOBODY)} --regid=${String(NOBODY)} --clear-groups -- /usr/bin/env -i "PATH=$CHILD_PATH" "HOME=$CHILD_HOME" "FUSION_HOME=$CHILD_HOME/fusion" "$@"`,
  ].join('\n');
  const r = spawnSync('unshare', ['--mount', '--propagation', 'private', '--', '/bin/sh', '-c', script, 'sh',
    ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
    process.execPath, join(view, 'dist', 'src', 'cli', 'main.js'), 'sandbox', 'exec', '--backend', backend, '--repo', scratch, '--', 'node', '-e', '0',
  ], {
    encoding: 'utf8', cwd: scratch, timeout: 60_000,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', PKG: ROOT, VIEW: view, CHILD_PATH: process.env.PATH ?? '/usr/bin:/bin', CHILD_HOME: home },
  });
  return { code: r.status, stderr: r.stderr };
}

/** Whether uid 65534 (in no group) may open the socket: only through its "other" bits. */
function nobodyMayOpen(path: string): boolean {
  return (statSync(path).mode & 0o006) === 0o006;
}

describeWithBwrap('sandbox_unavailable for a non-root user', () => {
  it('says "no access to Docker (docker group)" for a socket the user may not open, not "engine down"', () => {
    if (!existsSync(DOCKER_SOCKET) || nobodyMayOpen(DOCKER_SOCKET)) {
      console.warn(`!!! ${DOCKER_SOCKET} is absent or open to all here: the EACCES reason is not exercised`);
      return;
    }
    const r = execAsNobody('docker');
    expect(r.code, r.stderr).not.toBe(0);
    expect(r.stderr).toMatch(/sandbox_unavailable/);
    expect(r.stderr).toMatch(/no access to Docker: permission denied on \/var\/run\/docker\.sock \(this user is not in the docker group/);
    expect(r.stderr).not.toMatch(/not reachable|start dockerd|apt-get install docker\.io/);
  });

  it('never suggests installing an installed bwrap; with no writable cgroup it names the rlimit mode, which then works', () => {
    const r = execAsNobody('bwrap');
    if (r.code === 0) {
      console.warn('!!! uid 65534 has a usable cgroup here: the no-cgroup reason is not exercised');
      return;
    }
    expect(r.stderr).toMatch(/bubblewrap is installed but not usable/);
    expect(r.stderr).not.toMatch(/apt-get install bubblewrap|Install bubblewrap/);
    expect(r.stderr).toMatch(/no writable cgroup for this non-root daemon \(uid 65534\)/);
    expect(r.stderr).toMatch(/FUSION_SANDBOX_RLIMIT=1/);
    const rlimit = execAsNobody('bwrap', { FUSION_SANDBOX_RLIMIT: '1' });
    expect(rlimit.code, rlimit.stderr).toBe(0);
  });

  it('auto: one message with each backend\'s own reason and no generic install advice', () => {
    const r = execAsNobody('auto');
    if (r.code === 0) return;
    expect(r.stderr).toMatch(/no sandbox backend is usable: docker: .*; bwrap: /);
    expect(r.stderr).not.toMatch(/Install bubblewrap \(apt-get install bubblewrap\) or Docker/);
  });
});
