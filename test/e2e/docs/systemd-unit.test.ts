/**
 * The shipped systemd unit (examples/systemd/fusion.service, docs/operations.md#systemd):
 * `systemd-analyze verify` accepts it without a warning, and its own ExecStart line (the
 * install prefix pointed at this clone, the data directory at a temporary one, the socket group
 * at a throwaway group) starts a daemon whose socket is 0660 in that group, answers
 * `fusion tasks`, and exits 0 on SIGTERM (the unit's KillSignal). The hardening options take
 * effect only under systemd, which this test does not run.
 */
import { spawnSync } from 'node:child_process';
import { startCommand } from '../../helpers/cli.js';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../workflow/helpers.js';

const UNIT = join(ROOT, 'examples', 'systemd', 'fusion.service');
const unit = readFileSync(UNIT, 'utf8');
const directive = (name: string): string[] => unit.split('\n').filter((l) => l.startsWith(`${name}=`)).map((l) => l.slice(name.length + 1));

const root = process.getuid?.() === 0;
const analyze = spawnSync('sh', ['-c', 'command -v systemd-analyze']).status === 0;

describe('examples/systemd/fusion.service', () => {
  it('runs the daemon with the socket group, its data directory and the documented hardening', () => {
    expect(directive('ExecStart')).toEqual(['/usr/bin/node /opt/fusion/dist/src/cli/main.js daemon --data /var/lib/fusion --socket-group fusion-users']);
    for (const key of ['NoNewPrivileges', 'ProtectSystem', 'ProtectHome', 'ProtectKernelModules', 'RestrictSUIDSGID', 'StateDirectory', 'KillSignal']) expect(directive(key).length, key).toBe(1);
    // Each would break the sandboxes or hide callers' repositories (docs/operations.md#systemd).
    for (const key of ['PrivateTmp', 'RestrictNamespaces', 'ProtectControlGroups', 'ProtectKernelTunables', 'User']) expect(directive(key), key).toEqual([]);
    const ops = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
    expect(ops).toContain('examples/systemd/fusion.service');
  });

  it('systemd-analyze verify accepts it without a warning', (ctx) => {
    if (!analyze) {
      if (process.env.CI === 'true') throw new Error('systemd-analyze is missing (Debian package systemd; make setup installs it)');
      console.warn('\n!!! SKIPPING systemd-analyze verify: systemd-analyze is missing\n');
      ctx.skip();
    }
    const r = spawnSync('systemd-analyze', ['verify', UNIT], { encoding: 'utf8' });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
  });

  describe('its ExecStart line', () => {
    const group = `fsn-sd-${randomBytes(3).toString('hex')}`;
    const data = mkdtempSync(join(tmpdir(), 'fsn-systemd-'));
    // The group must traverse the directories above the socket, as it does /run.
    chmodSync(data, 0o755);
    afterAll(() => {
      if (root) spawnSync('groupdel', [group]);
      rmSync(data, { recursive: true, force: true });
    });

    it('starts a daemon on a 0660 group socket that answers and stops with 0 on SIGTERM', async (ctx) => {
      if (!root) {
        if (process.env.CI === 'true') throw new Error('the unit test needs root (CI runs as root)');
        console.warn('\n!!! SKIPPING the ExecStart run: needs root (groupadd, --socket-group)\n');
        ctx.skip();
      }
      expect(spawnSync('groupadd', [group]).status).toBe(0);
      const socket = join(data, 'run', 'fusion.sock');
      const [exe, ...args] = directive('ExecStart')[0]!
        .replace('/opt/fusion', ROOT).replace('/var/lib/fusion', join(data, 'home')).replace('fusion-users', group).split(' ');
      expect(existsSync(exe!)).toBe(true);
      // The shared socket's default is /run/fusion; another daemon may own that here.
      const daemon = startCommand(exe!, [...args, '--socket', socket], { env: { PATH: process.env.PATH ?? '', HOME: data }, cleanEnv: true });
      try {
        await daemon.waitForText('stderr', /fusion daemon listening/, 'the daemon to start');
        const st = statSync(socket);
        expect(st.mode & 0o777).toBe(0o660);
        const gid = Number(spawnSync('getent', ['group', group], { encoding: 'utf8' }).stdout.split(':')[2]);
        expect(st.gid).toBe(gid);
        const tasks = spawnSync(process.execPath, [join(ROOT, 'dist', 'src', 'cli', 'main.js'), 'tasks', '--socket', socket], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '', HOME: data } });
        expect({ status: tasks.status, stderr: tasks.stderr }).toEqual({ status: 0, stderr: '' });
      } finally {
        daemon.proc.kill('SIGTERM');
      }
      expect((await daemon.exited).code).toBe(0);
    }, 90_000);
  });
});
