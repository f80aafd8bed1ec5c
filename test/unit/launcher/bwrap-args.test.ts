/**
 * The bwrap invocation: required isolation flags, what is bound where, and what is never bound.
 */
import { describe, expect, it } from 'vitest';
import { buildBwrapArgs } from '../../../src/launcher/bwrap-args.js';

const runtime = {
  mountArgs: ['--ro-bind', '/usr', '/usr', '--symlink', 'usr/lib', '/lib', '--ro-bind-try', '/etc/ld.so.cache', '/etc/ld.so.cache'],
  defaultPath: '/usr/local/bin:/usr/bin:/bin',
};

const invocation = buildBwrapArgs({
  runtime,
  tmpfsBytes: 1234,
  repoDir: '/srv/repo',
  outDir: '/var/lib/fusion/out/a1',
  codeDir: '/usr/lib/fusion/child',
  brokerSocketPath: '/run/fusion-daemon/b1.sock',
  hasRequest: true,
  env: { FUSION_ROLE: 'candidate', PATH: '/usr/bin' },
  command: ['node', '/opt/fusion/child.js'],
});
const options = invocation.options;

/** The [source, dest] pairs of one bind flavour. */
function pairs(flag: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  options.forEach((o, i) => {
    if (o === flag) out.push([options[i + 1] as string, options[i + 2] as string]);
  });
  return out;
}

describe('buildBwrapArgs', () => {
  it('unshares everything, forbids new user namespaces, drops capabilities, clears the environment', () => {
    for (const flag of ['--unshare-all', '--unshare-user', '--disable-userns', '--die-with-parent', '--new-session', '--clearenv']) {
      expect(options).toContain(flag);
    }
    expect(options.join(' ')).toContain('--cap-drop ALL');
    expect(options).not.toContain('--share-net');
  });

  it('passes the seccomp filter, info and block fds', () => {
    expect(options.join(' ')).toContain('--seccomp 3 --info-fd 4 --block-fd 5');
  });

  it('binds the repository and code read-only, /out and the broker socket writable, the request by fd', () => {
    expect(pairs('--ro-bind')).toEqual(expect.arrayContaining([['/srv/repo', '/repo'], ['/usr/lib/fusion/child', '/opt/fusion'], ['/usr', '/usr']]));
    expect(pairs('--bind')).toEqual([['/var/lib/fusion/out/a1', '/out'], ['/run/fusion-daemon/b1.sock', '/run/fusion/broker.sock']]);
    expect(pairs('--ro-bind-data')).toEqual([['7', '/run/fusion/request.json']]);
    expect(options.join(' ')).toContain('--size 1234 --perms 1777 --tmpfs /tmp');
    expect(options.join(' ')).toContain('--proc /proc --dev /dev --remount-ro /dev');
  });

  it('binds a host noexec tmpfs at /tmp instead of its own tmpfs when one is given (root daemon)', () => {
    const withTmp = buildBwrapArgs({ runtime, tmpfsBytes: 1234, tmpDir: '/tmp/fusion-tmp-1-abc', hasRequest: false, env: {}, command: ['node'] }).options;
    expect(withTmp.join(' ')).toContain('--bind /tmp/fusion-tmp-1-abc /tmp');
    expect(withTmp).not.toContain('--tmpfs');
  });

  it('never binds host secrets or scratch space', () => {
    const sources = [...pairs('--ro-bind'), ...pairs('--bind'), ...pairs('--dev-bind')].map(([src]) => src);
    for (const src of sources) expect(src).not.toMatch(/^\/(root|home|work|tmp|etc\/(?!ld\.so\.cache))|^\/$/);
  });

  it('makes the root read-only after the mounts, and starts in /repo', () => {
    const remount = options.lastIndexOf('--remount-ro');
    expect(options[remount + 1]).toBe('/');
    expect(remount).toBeGreaterThan(options.lastIndexOf('--bind'));
    expect(options.join(' ')).toContain('--chdir /repo');
  });

  it('sets exactly the given environment, with a default PATH the spec may override', () => {
    const env = pairs('--setenv');
    expect(env).toEqual([['PATH', '/usr/bin'], ['FUSION_ROLE', 'candidate']]);
    expect(options.indexOf('--clearenv')).toBeLessThan(options.indexOf('--setenv'));
  });

  it('keeps the command apart from the options', () => {
    expect(invocation.command).toEqual(['node', '/opt/fusion/child.js']);
    expect(options).not.toContain('/opt/fusion/child.js');
  });
});

describe('a missing bubblewrap', () => {
  it('makes check() fail with what to install, and launch() throw sandbox_unavailable', async () => {
    const { createBwrapLauncher } = await import('../../../src/launcher/bwrap.js');
    const { silentLogger } = await import('../../../src/log.js');
    const { DEFAULT_SANDBOX_LIMITS } = await import('../../../src/launcher/port.js');
    const launcher = createBwrapLauncher({ log: silentLogger(), bwrapPath: '/nonexistent/bwrap' });
    const check = await launcher.check();
    expect(check.ok).toBe(false);
    expect(check.reason).toMatch(/^bubblewrap is not usable: .*\/nonexistent\/bwrap.*; install it with `apt-get install bubblewrap`$/);
    await expect(launcher.launch({
      taskId: 't', label: 'l', repoDir: '/', outDir: '/', command: ['true'], limits: DEFAULT_SANDBOX_LIMITS,
    })).rejects.toMatchObject({ code: 'sandbox_unavailable' });
  });
});
