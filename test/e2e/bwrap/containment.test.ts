/**
 * Proves from inside a real bwrap sandbox what the child can and cannot see or do.
 */
import { once } from 'node:events';
import { stat, readFile, writeFile, chmod } from 'node:fs/promises';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createBwrapLauncher, type BwrapLauncher } from '../../../src/launcher/bwrap.js';
import { captureLogs, describeWithBwrap, IS_ROOT, makeScratch, probe, run, type Scratch } from './helpers.js';

const SENTINEL = 'FUSION_E2E_SENTINEL_DAEMON_SECRET';

/** What test/fixtures/probes/inspect.mjs prints. */
interface InspectReport {
  uid: number;
  gid: number;
  cwd: string;
  env: Record<string, string>;
  status: Record<string, string | null>;
  netDev: string[];
  writes: Record<string, string>;
  devWrites: Record<string, string>;
  repoListing: string[];
  rootEntries: string[];
  etcEntries: string[] | null;
  processes: Array<{ pid: number; cmd: string }>;
  fds: string[];
  request: string | null;
  session: { sid: number; ttyNr: number };
}

describeWithBwrap('bwrap launcher: containment', () => {
  let scratch: Scratch;
  let launcher: BwrapLauncher;
  const logs = captureLogs();

  beforeAll(async () => {
    process.env[SENTINEL] = 'must-not-leak';
    scratch = await makeScratch();
    launcher = createBwrapLauncher({ log: logs.log });
  });

  afterAll(async () => {
    delete process.env[SENTINEL];
    await scratch.cleanup();
  });

  it('check() passes on this machine', async () => {
    expect(await launcher.check()).toEqual({ ok: true });
  });

  it('isolates network, filesystem, processes, privileges and environment', async () => {
    const requestFile = join(scratch.root, 'request.json');
    await writeFile(requestFile, '{"kind":"probe"}', { mode: 0o600 });
    const { exit, stdout, stderr } = await run(launcher, scratch, {
      command: probe('inspect.mjs'),
      env: { FUSION_CHILD: '1' },
      requestFile,
    });
    expect(stderr).toBe('');
    expect(exit).toMatchObject({ reason: 'exited', exitCode: 0, signal: null });
    const report = JSON.parse(stdout) as InspectReport;

    // Network: a fresh namespace with only loopback.
    expect(report.netDev).toEqual(['lo']);
    // Filesystem: /repo, /usr, /opt/fusion, /dev and / are read-only; /out and /tmp are writable.
    expect(report.writes).toEqual({ repo: 'EROFS', root: 'EROFS', usr: 'EROFS', code: 'EROFS', tmp: 'ok', out: 'ok' });
    expect(report.devWrites).toEqual({ dev: 'EROFS', devShm: 'EROFS', devNull: 'ok' });
    expect(report.repoListing.sort()).toEqual(['README.md', 'src']);
    expect(report.rootEntries).toEqual(expect.arrayContaining(['dev', 'opt', 'out', 'proc', 'repo', 'run', 'tmp', 'usr']));
    for (const hidden of ['root', 'home', 'work', 'var', 'srv', 'mnt']) expect(report.rootEntries).not.toContain(hidden);
    expect(report.etcEntries).toEqual(['ld.so.cache']);
    expect(report.cwd).toBe('/repo');
    // Host processes are invisible: only the sandbox's init (bwrap's reaper, pid 1) and the probe.
    expect(report.processes.map((p) => p.pid).sort()).toEqual([1, 2]);
    for (const p of report.processes) expect(p.cmd).not.toMatch(/vitest/);
    // bwrap's options travel on a pipe, so pid 1's command line shows no host path or env value.
    const init = report.processes.find((p) => p.pid === 1);
    expect(init?.cmd).toMatch(/^\S*bwrap --args 6 -- node \/opt\/fusion\/inspect\.mjs$/);
    // Privileges: no capabilities at all, no_new_privs, seccomp filter mode, unprivileged uid.
    expect(report.status).toMatchObject({
      CapInh: '0000000000000000', CapPrm: '0000000000000000', CapEff: '0000000000000000',
      CapBnd: '0000000000000000', CapAmb: '0000000000000000', NoNewPrivs: '1', Seccomp: '2',
    });
    expect(report.uid).not.toBe(0);
    expect(report.gid).not.toBe(0);
    if (IS_ROOT) expect(report.uid).toBe(65534);
    // --new-session: the session is the sandbox init's, with no controlling terminal (no TIOCSTI).
    expect(report.session).toEqual({ sid: 1, ttyNr: 0 });
    // Environment: exactly what the spec gave, plus PATH (and PWD, which bwrap sets).
    expect(report.env[SENTINEL]).toBeUndefined();
    expect(Object.keys(report.env).sort()).toEqual(['FUSION_CHILD', 'PATH', 'PWD']);
    // The request is a read-only copy, readable whatever its host mode.
    expect(report.request).toBe('{"kind":"probe"}');
    // No inherited descriptors beyond stdio and node's own (eventfd, epoll, pipes, anon inodes).
    for (const fd of report.fds) expect(fd).not.toMatch(/-> \/(?!dev\/null|proc\/)/);
  });

  it('files written to /out land on the host owned by an unprivileged uid', async () => {
    await run(launcher, scratch, { command: probe('inspect.mjs') });
    const file = join(scratch.outDir, 'written-by-sandbox.txt');
    expect(await readFile(file, 'utf8')).toBe('hello from the sandbox\n');
    const info = await stat(file);
    expect(info.uid).not.toBe(0);
    expect(info.gid).not.toBe(0);
    if (IS_ROOT) expect(info.uid).toBe(65534);
    // The repository stayed untouched.
    await expect(stat(join(scratch.repoDir, 'probe-write.txt'))).rejects.toThrow();
  });

  it('denies dangerous syscalls and non-Unix sockets; a host TCP server is unreachable', async () => {
    const server = net.createServer((socket) => socket.end('you should not see this'));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as net.AddressInfo).port;
    try {
      const { exit, stdout } = await run(launcher, scratch, { command: probe('syscalls.mjs', String(port)) });
      expect(exit.reason).toBe('exited');
      const r = JSON.parse(stdout) as Record<string, string>;
      const EPERM = 'errno=1';
      expect(r.getpid).toMatch(/^ret=\d+$/); // the perl syscall harness itself works
      expect(r.io_uring_setup).toBe(EPERM);
      expect(r.ptrace_traceme).toBe(EPERM);
      expect(r.unshare_none).toBe(EPERM); // unshare(0) succeeds anywhere the syscall is allowed
      expect(r.unshare_user).toBe(EPERM);
      expect(r.setns).toBe(EPERM);
      expect(r.bpf).toBe(EPERM);
      expect(r.keyctl).toBe(EPERM);
      expect(r.mount).toBe(EPERM);
      expect(r.perf_event_open).toBe(EPERM);
      expect(r.userfaultfd).toBe(EPERM);
      expect(r.clone3).toBe('errno=38'); // ENOSYS, so libc falls back to clone()
      expect(r.socket_inet).toBe(EPERM);
      expect(r.socket_inet6).toBe(EPERM);
      expect(r.socket_netlink).toBe(EPERM);
      expect(r.socket_packet).toBe(EPERM);
      expect(r.socketpair_inet).toBe(EPERM);
      expect(r.socket_unix).toMatch(/^ret=\d+$/);
      expect(r.socketpair_unix).toBe('ret=0');
      expect(r.unixRoundTrip).toBe('pong');
      expect(r.tcpConnect).toBe('EPERM');
      expect(r.udpBind).toBe('EPERM');
    } finally {
      server.close();
    }
  });

  it('the broker socket is the only channel out, and it works', async () => {
    const socketPath = join(scratch.root, 'broker.sock');
    const server = net.createServer((socket) => socket.end('broker says hi'));
    server.listen(socketPath);
    await once(server, 'listening');
    await chmod(socketPath, 0o600); // as the broker would: the launcher hands it to the sandbox uid
    try {
      const script = "const c=require('net').connect('/run/fusion/broker.sock');let d='';c.on('data',x=>d+=x);c.on('end',()=>console.log(d));c.on('error',e=>console.log('ERR',e.code))";
      const { stdout } = await run(launcher, scratch, { command: ['node', '-e', script], brokerSocketPath: socketPath });
      expect(stdout.trim()).toBe('broker says hi');
    } finally {
      server.close();
    }
  });

  it('runs three sandboxes at once, each with its own /out', async () => {
    const scratches = await Promise.all([0, 1, 2].map(() => makeScratch()));
    try {
      const results = await Promise.all(scratches.map((s, i) => run(launcher, s, { command: probe('inspect.mjs'), label: `candidate-${i + 1}` })));
      for (const [i, result] of results.entries()) {
        expect(result.exit).toMatchObject({ reason: 'exited', exitCode: 0 });
        const report = JSON.parse(result.stdout) as InspectReport;
        expect(report.processes.map((p) => p.pid).sort()).toEqual([1, 2]);
        expect(await readFile(join(scratches[i]!.outDir, 'written-by-sandbox.txt'), 'utf8')).toContain('hello');
      }
    } finally {
      await Promise.all(scratches.map((s) => s.cleanup()));
    }
  });

  it('logs exactly one line per launch and one per exit', async () => {
    const before = logs.lines().length;
    await run(launcher, scratch, { command: probe('exit-code.mjs', '3'), label: 'log-probe' });
    const lines = logs.lines().slice(before).filter((l) => l.label === 'log-probe');
    expect(lines.map((l) => l.msg)).toEqual(['sandbox launched', 'sandbox exited']);
    expect(lines[0]).toMatchObject({ component: 'launcher', taskId: 'task-e2e' });
    expect(typeof lines[0]?.limitMechanism).toBe('string');
    expect(lines[1]).toMatchObject({ reason: 'exited', exitCode: 3 });
  });
});
