/**
 * ONE containment suite, run against every sandbox backend: the same probes, the same
 * expectations. Each backend's `Launcher` is built the way the daemon builds it; the probe
 * scripts (test/fixtures/probes) are bound read-only at /opt/fusion through `codeDir`, so the
 * same spec works for bwrap and Docker.
 *
 * What is proven from inside a real sandbox: only `lo`; a TCP server on the host's loopback is
 * unreachable; /repo read-only and the only writable places are /out and /tmp; the /tmp size
 * cap; host processes invisible; no capabilities, no_new_privs, an active seccomp filter that
 * denies io_uring_setup, ptrace and unshare; a non-root uid with unprivileged host-side file
 * ownership; no variable of the daemon's environment; the daemon's data directory and sockets
 * invisible; a fork bomb stopped by the process cap; an oversized allocation killed by the memory
 * cap with the daemon unaffected; the wall timeout kills; /dev read-only; no controlling terminal;
 * the request a read-only copy; no inherited host descriptors; concurrent sandboxes with their own
 * /out; one log line per launch and one per exit.
 *
 * A few assertions pin one backend's exact shape (bwrap's pid namespace, its /etc, its env): each
 * says why it cannot hold for the other backend.
 */
import { once } from 'node:events';
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { promisify } from 'node:util';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Launcher } from '../../../src/launcher/port.js';
import { DEFAULT_SANDBOX_UIDS } from '../../../src/launcher/uid-pool.js';
import { PRIVATE_MOUNT_BASE } from '../../../src/launcher/private-binds.js';
import { HOST_OUT_BASE } from '../../../src/launcher/out-mount.js';
import { backendAvailability, BACKENDS, captureLogs, createLauncher, describeBackend, freshOutDir, IS_ROOT, limits, makeScratch, PROBES_DIR, probe, report, run, type Scratch } from './helpers.js';
import { waitFor } from '../../helpers/wait.js';

const MiB = 1024 * 1024;
const SENTINEL = 'FUSION_CONTAINMENT_SENTINEL_SECRET';
const EPERM = 'errno=1';
const availability = await backendAvailability();
const isRangeUid = (uid: number): boolean => uid >= DEFAULT_SANDBOX_UIDS.start && uid <= DEFAULT_SANDBOX_UIDS.end && uid !== 65534;
const execFileP = promisify(execFile);

/** A host process as `uid` (what an escaped sandbox of that uid would be): connect to a socket, list and read a directory. */
async function asUid(uid: number, socketPath: string, dir: string): Promise<{ connect: string; list: string; read: string }> {
  const script = `const net=require('net'),fs=require('fs');const r={};
try{fs.readdirSync(process.argv[2]);r.list='ok'}catch(e){r.list=e.code}
try{fs.readFileSync(process.argv[2]+'/written-by-sandbox.txt');r.read='ok'}catch(e){r.read=e.code}
const c=net.connect(process.argv[1]);c.on('connect',()=>{r.connect='connected';c.destroy();console.log(JSON.stringify(r))});c.on('error',e=>{r.connect=e.code;console.log(JSON.stringify(r))})`;
  const { stdout } = await execFileP('/usr/bin/setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--', process.execPath, '-e', script, socketPath, dir], { cwd: '/' });
  return JSON.parse(stdout) as { connect: string; list: string; read: string };
}

for (const backend of BACKENDS) {
  describeBackend(`containment [${backend}]`, availability[backend], () => {
    let scratch: Scratch;
    let launcher: Launcher;
    const logs = captureLogs();

    beforeAll(async () => {
      // A secret in the daemon's own environment: it must not reach any sandbox process.
      process.env[SENTINEL] = 'must-not-leak';
      scratch = await makeScratch(`fusion-containment-${backend}-`);
      launcher = createLauncher(backend, logs.log);
    });

    afterAll(async () => {
      delete process.env[SENTINEL];
      await scratch.cleanup();
    });

    it('check() passes', async () => {
      expect(await launcher.check()).toMatchObject({ ok: true });
    });

    it('network: only lo; a TCP server on the host loopback is unreachable; only AF_UNIX sockets', async () => {
      const server = net.createServer((socket) => socket.end('you should not see this'));
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      const port = (server.address() as net.AddressInfo).port;
      try {
        const inspect = report(await run(launcher, scratch, { command: probe('inspect.mjs') }));
        expect(inspect.netDev).toEqual(['lo']);
        const syscalls = await run(launcher, scratch, { command: probe('syscalls.mjs', String(port)) });
        expect(syscalls.exit.reason).toBe('exited');
        const r = report<Record<string, string>>(syscalls);
        expect(r.tcpConnect).not.toBe('connected');
        expect(r.tcpConnect).toBe('EPERM');
        expect(r.udpBind).toBe('EPERM');
        for (const family of ['socket_inet', 'socket_inet6', 'socket_netlink', 'socket_packet', 'socketpair_inet']) expect(r[family], family).toBe(EPERM);
        expect(r.socket_unix).toMatch(/^ret=\d+$/);
        expect(r.socketpair_unix).toBe('ret=0');
        expect(r.unixRoundTrip).toBe('pong');
      } finally {
        server.close();
      }
    });

    it('filesystem: /repo read-only; the only writable places are /out and /tmp', async () => {
      const inspect = report(await run(launcher, scratch, { command: probe('inspect.mjs') }));
      // gVisor's VFS checks permissions before the read-only flag: EACCES where Linux says EROFS.
      const refused = backend === 'gvisor' ? expect.stringMatching(/^(EROFS|EACCES)$/) : 'EROFS';
      expect(inspect.writes).toEqual({ repo: refused, root: refused, usr: refused, code: refused, tmp: 'ok', out: 'ok' });
      expect([...inspect.repoListing].sort()).toEqual(['README.md', 'src']);
      expect(inspect.cwd).toBe('/repo');
      // /dev: only the device nodes are writable. bwrap mounts /dev and /dev/shm read-only (EROFS);
      // Docker's /dev is a root-owned tmpfs (EACCES for the sandbox uid) without /dev/shm (shmSize 0).
      if (backend === 'bwrap') expect(inspect.devWrites).toEqual({ dev: 'EROFS', devShm: 'EROFS', devNull: 'ok' });
      expect(inspect.devWrites.devNull).toBe('ok');
      expect(inspect.devWrites.dev).not.toBe('ok');
      expect(inspect.devWrites.devShm).not.toBe('ok');
      // bwrap builds /etc from nothing (only the loader cache); a Docker image brings its own /etc
      // (passwd, hosts, resolv.conf…), which is the image's, not the host's.
      if (backend === 'bwrap') expect(inspect.etcEntries).toEqual(['ld.so.cache']);
      const walk = report<{ visited: number; writable: string[] }>(await run(launcher, scratch, { command: probe('containment/writable-dirs.mjs') }));
      expect(walk.visited).toBeGreaterThan(5);
      expect(walk.writable.filter((dir) => !/^\/(out|tmp)(\/|$)/.test(dir))).toEqual([]);
      expect(walk.writable).toEqual(expect.arrayContaining(['/out', '/tmp']));
    });

    it('/tmp is capped at tmpfsBytes', async () => {
      const tmpfsBytes = 8 * MiB;
      const r = report<{ bytes: number; error: string | null }>(await run(launcher, scratch, {
        command: probe('containment/tmp-fill.mjs'),
        limits: limits({ tmpfsBytes }),
      }));
      expect(r.error).toBe('ENOSPC');
      expect(r.bytes).toBeLessThanOrEqual(tmpfsBytes);
      expect(r.bytes).toBeGreaterThan(tmpfsBytes / 2);
    });

    it('/tmp is noexec: a file written there cannot be executed (bwrap: under a root daemon)', async () => {
      const r = report<{ error: string | null; stdout: string | null }>(await run(launcher, scratch, { command: probe('containment/tmp-exec.mjs') }));
      if (backend === 'bwrap' && !IS_ROOT) {
        // A non-root daemon cannot mount a noexec tmpfs: bwrap's own /tmp allows exec (docs/security.md#isolation-tiers).
        console.warn('bwrap /tmp is exec-able under a non-root daemon');
        return;
      }
      expect(r).toEqual({ error: 'EACCES', stdout: null });
    });

    it('/out is noexec under a root daemon on bwrap: a binary written there cannot be run (noexec /tmp is not bypassed)', async () => {
      const r = report<Record<string, string>>(await run(launcher, scratch, { command: probe('containment/exec-anywhere.mjs') }));
      if (IS_ROOT || backend !== 'bwrap') expect(r['/tmp']).toBe('EACCES');
      // /dev is read-only (bwrap) or has no shm (Docker): no exec-able scratch space there either.
      expect(r['/dev/shm']).toMatch(/^(write:|EACCES)/);
      if (backend === 'bwrap' && IS_ROOT) expect(r['/out']).toBe('EACCES');
      else console.warn(`${backend}: /out allows exec (${r['/out']}): docs/security.md#isolation-tiers`);
    });

    it("/tmp's mountinfo root reveals no host path", async () => {
      const result = await run(launcher, scratch, { command: ['node', '-e', "process.stdout.write(require('fs').readFileSync('/proc/self/mountinfo','utf8'))"] });
      const tmpLine = result.stdout.split('\n').find((line) => line.split(' ')[4] === '/tmp');
      if (backend === 'bwrap' && !IS_ROOT) return;
      expect(tmpLine?.split(' ')[3]).toBe('/');
    });

    it('host processes are invisible', async () => {
      const inspect = report(await run(launcher, scratch, { command: probe('inspect.mjs') }));
      const processes = inspect.processes as Array<{ pid: number; cmd: string }>;
      // The sandbox's init (bwrap's reaper or docker-init) and the probe; nothing of the host.
      expect(processes.length).toBeLessThanOrEqual(2);
      expect(processes.map((p) => p.pid)).toContain(1);
      for (const p of processes) expect(p.cmd).toMatch(/inspect\.mjs/);
      for (const p of processes) expect(p.cmd).not.toMatch(/vitest/);
      if (backend === 'bwrap') {
        // bwrap is the namespace's init itself, so the probe is pid 2 (docker-init starts it at a
        // pid the engine picks). bwrap's options travel on a pipe, so pid 1's command line shows
        // no host path or env value (Docker's init takes no options from us).
        expect(processes.map((p) => p.pid).sort()).toEqual([1, 2]);
        const init = processes.find((p) => p.pid === 1);
        expect(init?.cmd).toMatch(/^\S*bwrap --args 6 -- node \/opt\/fusion\/inspect\.mjs$/);
      }
    });

    it('privileges: no capabilities, no_new_privs, seccomp filter; io_uring_setup, ptrace, unshare denied', async () => {
      const inspect = report(await run(launcher, scratch, { command: probe('inspect.mjs') }));
      // gVisor's /proc/self/status has no CapAmb or NoNewPrivs lines (runsc sets no_new_privs
      // from the container config; the denied syscalls below prove the filter).
      const gvisor = backend === 'gvisor';
      expect(inspect.status).toEqual({
        CapInh: '0000000000000000', CapPrm: '0000000000000000', CapEff: '0000000000000000',
        CapBnd: '0000000000000000', CapAmb: gvisor ? null : '0000000000000000', NoNewPrivs: gvisor ? null : '1', Seccomp: '2',
      });
      const r = report<Record<string, string>>(await run(launcher, scratch, { command: probe('syscalls.mjs') }));
      expect(r.getpid).toMatch(/^ret=\d+$/); // the syscall harness itself works
      expect(r.io_uring_setup).toBe(EPERM);
      expect(r.ptrace_traceme).toBe(EPERM);
      expect(r.unshare_none).toBe(EPERM);
      expect(r.unshare_user).toBe(EPERM);
      expect(r.setns).toBe(EPERM);
      expect(r.bpf).toBe(EPERM);
      expect(r.keyctl).toBe(EPERM);
      expect(r.mount).toBe(EPERM);
      expect(r.perf_event_open).toBe(EPERM);
      expect(r.userfaultfd).toBe(EPERM);
      expect(r.clone3).toBe('errno=38');
    });

    it('every socket family but AF_UNIX is denied (AF_VSOCK, AF_NETLINK, AF_PACKET…); process_vm_* denied', async () => {
      const r = report<{ socketFamilies: Record<string, [string, string]>; process_vm_readv: string; process_vm_writev: string; perlError: string | null }>(
        await run(launcher, scratch, { command: probe('containment/more-syscalls.mjs') }),
      );
      expect(r.perlError).toBeNull();
      for (const [family, results] of Object.entries(r.socketFamilies)) {
        if (family === '1') expect(results[0], 'AF_UNIX stream').toMatch(/^ret=\d+$/);
        else expect(results, `family ${family}`).toEqual([EPERM, EPERM]);
      }
      expect(r.process_vm_readv).toBe(EPERM);
      expect(r.process_vm_writev).toBe(EPERM);
    });

    it('identity: uid and gid are not 0; under root a uid of the sandbox range (never 65534) that owns /out alone', async () => {
      const out = join(scratch.root, 'owner-out');
      await mkdir(out, { mode: 0o700 }); // root's, as the workflow's staging makes it: the launcher hands it over
      const inspect = report(await run(launcher, scratch, { command: probe('inspect.mjs'), outDir: out }));
      expect(inspect.uid).not.toBe(0);
      expect(inspect.gid).not.toBe(0);
      expect(inspect.groups).not.toContain(0);
      if (IS_ROOT) {
        expect(isRangeUid(inspect.uid)).toBe(true);
        expect(inspect.gid).toBe(inspect.uid);
        expect(inspect.groups.filter((g: number) => g !== inspect.gid)).toEqual([]);
      }
      const info = await stat(join(out, 'written-by-sandbox.txt'));
      expect(await readFile(join(out, 'written-by-sandbox.txt'), 'utf8')).toBe('hello from the sandbox\n');
      if (IS_ROOT) {
        // /out was the uid's own tmpfs; the daemon copied it into its root-owned staging after the exit.
        expect({ uid: info.uid, mode: info.mode & 0o777 }).toEqual({ uid: 0, mode: 0o600 });
        const dir = await stat(out);
        expect({ uid: dir.uid, mode: dir.mode & 0o777 }).toEqual({ uid: 0, mode: 0o700 });
      } else {
        expect(info.uid).toBe(inspect.uid);
      }
      await expect(stat(join(scratch.repoDir, 'probe-write.txt'))).rejects.toThrow();
    });

    it('environment: nothing of the daemon environment (sentinel) in any sandbox process', async () => {
      const result = await run(launcher, scratch, { command: probe('containment/visibility.mjs', '--sentinel', SENTINEL), env: { FUSION_CHILD: '1' } });
      const r = report(result);
      expect(r.sentinelSeen).toBe(false);
      const inspect = report(await run(launcher, scratch, { command: probe('inspect.mjs'), env: { FUSION_CHILD: '1' } }));
      expect(inspect.env[SENTINEL]).toBeUndefined();
      expect(inspect.env.FUSION_CHILD).toBe('1');
      // Only what the spec gave plus what the runtime itself defines (PATH; PWD for bwrap; HOME for Docker).
      for (const key of Object.keys(inspect.env)) expect(['FUSION_CHILD', 'PATH', 'PWD', 'HOME']).toContain(key);
      // Exactly: bwrap adds PWD; the Docker engine adds HOME (its HOSTNAME is unset).
      const expectedKeys = backend === 'bwrap' ? ['FUSION_CHILD', 'PATH', 'PWD'] : ['FUSION_CHILD', 'HOME', 'PATH'];
      expect(Object.keys(inspect.env).sort()).toEqual(expectedKeys);
    });

    it('a clean exit; no host directory at the root; its own session without a terminal; the request a read-only copy; no inherited host descriptors', async () => {
      const requestFile = join(scratch.root, 'request.json');
      await writeFile(requestFile, '{"kind":"probe"}', { mode: 0o600 });
      const result = await run(launcher, scratch, { command: probe('inspect.mjs'), env: { FUSION_CHILD: '1' }, requestFile });
      expect(result.stderr).toBe('');
      expect(result.exit).toMatchObject({ reason: 'exited', exitCode: 0, signal: null });
      const inspect = report(result);
      // The root holds the sandbox's own mounts (/run with the request in it) and nothing of the host's.
      expect(inspect.rootEntries).toEqual(expect.arrayContaining(['dev', 'opt', 'out', 'proc', 'repo', 'run', 'tmp', 'usr']));
      for (const hidden of ['root', 'home', 'work', 'var', 'srv', 'mnt']) expect(inspect.rootEntries).not.toContain(hidden);
      // A new session led by the sandbox's init, with no controlling terminal (no TIOCSTI).
      expect(inspect.session).toEqual({ sid: 1, ttyNr: 0 });
      // The request is a read-only copy, readable whatever its host mode.
      expect(inspect.request).toBe('{"kind":"probe"}');
      // No inherited descriptors beyond stdio and node's own (eventfd, epoll, pipes, anon inodes).
      for (const fd of inspect.fds as string[]) expect(fd).not.toMatch(/-> \/(?!dev\/null|proc\/)/);
    });

    it("the daemon's data directory and sockets are invisible", async () => {
      // A stand-in for the daemon's data dir (0700) with its API socket listening.
      const home = join(scratch.root, 'daemon-home');
      await mkdir(home, { mode: 0o700 });
      const socketPath = join(home, 'fusion.sock');
      const server = net.createServer((socket) => socket.end('daemon API'));
      server.listen(socketPath);
      await once(server, 'listening');
      try {
        const paths = [home, socketPath, scratch.root, '/var/run/docker.sock', '/run/docker.sock', '/var/lib/docker', process.cwd()];
        const r = report(await run(launcher, scratch, { command: probe('containment/visibility.mjs', ...paths) }));
        for (const path of paths) {
          expect(r.paths[path].exists, path).toBe('ENOENT');
          expect(r.paths[path].connect, path).not.toBe('connected');
        }
      } finally {
        server.close();
      }
    });

    it('the broker socket is the only channel out, and it works', async () => {
      const socketDir = join(scratch.root, 'sock');
      await mkdir(socketDir, { mode: 0o711 }); // as the workflow's staging makes it: traversable, root's
      const socketPath = join(socketDir, 'broker.sock');
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

    it.runIf(IS_ROOT)('one uid per sandbox: concurrent sandboxes never share one; no other uid of the range reaches a broker or an /out', async () => {
      // Three sandboxes at once (a task's three candidates), each with its own broker socket and /out.
      const servers: net.Server[] = [];
      const boxes = await Promise.all([1, 2, 3].map(async (i) => {
        const dir = join(scratch.root, `peer-${i}`);
        await mkdir(join(dir, 'sock'), { recursive: true, mode: 0o711 });
        await chmod(dir, 0o711);
        await chmod(join(dir, 'sock'), 0o711);
        await mkdir(join(dir, 'out'), { mode: 0o700 });
        const socketPath = join(dir, 'sock', 'broker.sock');
        const server = net.createServer((socket) => {
          socket.on('error', () => undefined); // the probes hang up at once
          socket.end('hi');
        });
        server.listen(socketPath);
        await once(server, 'listening');
        servers.push(server);
        return { socketPath, outDir: join(dir, 'out') };
      }));
      try {
        // Each sandbox writes its file, reports its uid, then stays alive until told to stop.
        const script = "require('fs').writeFileSync('/out/written-by-sandbox.txt','mine');console.log(process.getuid());setTimeout(()=>{},60000)";
        const uids: number[] = [];
        const handles = await Promise.all(boxes.map((box, i) => launcher.launch({
          taskId: 'task-e2e', label: `candidate-${i + 1}`, repoDir: scratch.repoDir, outDir: box.outDir, codeDir: PROBES_DIR,
          brokerSocketPath: box.socketPath, command: ['node', '-e', script], limits: limits(),
          onStdout: (chunk) => uids.push(Number(chunk.toString().trim())),
        })));
        try {
          await waitFor('three sandboxes to print their uids', () => uids.length === 3, 60_000);
          expect(new Set(uids).size).toBe(3);
          for (const uid of uids) expect(isRangeUid(uid)).toBe(true);
          // Where each live /out is seen from the host: bwrap's private tmpfs through its own
          // process's root, Docker's host tmpfs (the mount whose options name the uid).
          const mountinfo = await readFile('/proc/self/mountinfo', 'utf8');
          const liveOut = (uid: number, i: number): string => backend === 'bwrap'
            ? `/proc/${handles[i]!.pid}/root${PRIVATE_MOUNT_BASE}/out`
            : (mountinfo.split('\n').find((l) => l.includes(` ${HOST_OUT_BASE}/`) && l.includes(`uid=${uid},`))?.split(' ')[4] ?? '/nonexistent');
          const owners = await Promise.all(boxes.map(async (box) => (await stat(box.socketPath)).uid));
          for (const [i, box] of boxes.entries()) {
            expect((await stat(box.socketPath)).mode & 0o777).toBe(0o600);
            const own = owners[i]!;
            expect(uids).toContain(own);
            const out = liveOut(own, i);
            // The holder itself gets in where its files can be reached (the probe is not vacuous)…
            expect(await asUid(own, box.socketPath, out)).toMatchObject({ connect: 'connected', ...(backend === 'bwrap' ? { list: 'ok', read: 'ok' } : {}) });
            // …a peer sandbox's uid (an escaped candidate) and an unused uid of the range do not.
            const peer = owners[(i + 1) % 3]!;
            for (const other of [peer, DEFAULT_SANDBOX_UIDS.end - 1]) {
              expect(await asUid(other, box.socketPath, out)).toEqual({ connect: 'EACCES', list: 'EACCES', read: 'EACCES' });
            }
          }
        } finally {
          await Promise.all(handles.map((h) => h.kill()));
        }
      } finally {
        for (const server of servers) server.close();
      }
    });

    it('a repository and code directory under a 0700 parent work, without opening them to the sandbox uid', async () => {
      const hidden = await mkdtemp(join(tmpdir(), 'fusion-private-'));
      try {
        await chmod(hidden, 0o700);
        const repo = join(hidden, 'home', 'repo');
        const code = join(hidden, 'home', 'code');
        await mkdir(join(repo, 'src'), { recursive: true, mode: 0o755 });
        await chmod(join(hidden, 'home'), 0o700);
        await writeFile(join(repo, 'src', 'main.ts'), 'export const answer = 42;\n', { mode: 0o644 });
        await mkdir(code, { mode: 0o755 });
        await writeFile(join(code, 'list.mjs'), "import fs from 'node:fs';console.log(JSON.stringify({files:fs.readdirSync('/repo/src'),text:fs.readFileSync('/repo/src/main.ts','utf8')}))", { mode: 0o644 });
        const result = await run(launcher, scratch, { repoDir: repo, codeDir: code, command: ['node', '/opt/fusion/list.mjs'] });
        expect(report(result)).toEqual({ files: ['main.ts'], text: 'export const answer = 42;\n' });
        // Nothing was opened up: the parents are still 0700.
        expect((await stat(hidden)).mode & 0o777).toBe(0o700);
        expect((await stat(join(hidden, 'home'))).mode & 0o777).toBe(0o700);
      } finally {
        await rm(hidden, { recursive: true, force: true });
      }
    });

    it('runs three sandboxes at once, each with its own /out', async () => {
      const scratches = await Promise.all([0, 1, 2].map(() => makeScratch(`fusion-containment-${backend}-`)));
      try {
        const results = await Promise.all(scratches.map((s, i) => run(launcher, s, { command: probe('inspect.mjs'), label: `candidate-${i + 1}` })));
        for (const [i, result] of results.entries()) {
          expect(result.exit).toMatchObject({ reason: 'exited', exitCode: 0 });
          const pids = (report(result).processes as Array<{ pid: number }>).map((p) => p.pid).sort();
          // Each in its own pid namespace: its init and the probe (pid 2 under bwrap, see above).
          if (backend === 'bwrap') expect(pids).toEqual([1, 2]);
          else expect(pids).toHaveLength(2);
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
      expect(lines[0]).toMatchObject({ component: 'launcher', launcher: backend, taskId: 'task-e2e' });
      // What identifies the sandbox in the log: bwrap names its cap mechanism (cgroup v2/v1 or
      // rlimits); Docker leaves the caps to the engine and names the container instead.
      if (backend === 'bwrap') expect(typeof lines[0]?.limitMechanism).toBe('string');
      else expect(typeof lines[0]?.containerId).toBe('string');
      expect(lines[1]).toMatchObject({ reason: 'exited', exitCode: 3 });
    });

    it('a fork bomb is contained by the process cap', async () => {
      const maxProcesses = 40;
      const result = await run(launcher, scratch, { command: probe('fork-bomb.mjs'), limits: limits({ maxProcesses, wallMs: 30_000 }) });
      expect(result.exit.reason).toBe('exited');
      const r = report<{ started: number; error: string | null }>(result);
      expect(r.error).toBe('EAGAIN');
      expect(r.started).toBeGreaterThan(0);
      expect(r.started).toBeLessThan(maxProcesses);
    });

    it('an oversized allocation is killed by the memory cap; the daemon is unaffected', async () => {
      const rssBefore = process.memoryUsage().rss;
      const { exit, stdout } = await run(launcher, scratch, {
        command: probe('memory-hog.mjs', String(1024 * MiB)),
        limits: limits({ memoryBytes: 192 * MiB, wallMs: 60_000 }),
      });
      expect(stdout).not.toContain('ALLOCATED_ALL');
      expect(exit.exitCode === 0 && exit.reason === 'exited').toBe(false);
      // The daemon (this process) is alive, did not grow, and launches the next sandbox normally.
      expect(process.memoryUsage().rss - rssBefore).toBeLessThan(256 * MiB);
      const next = await run(launcher, scratch, { command: probe('exit-code.mjs', '0') });
      expect(next.exit).toMatchObject({ reason: 'exited', exitCode: 0 });
    });

    it('/out caps count nested directories: a child filling /out/a/b/c is stopped (bytes and files)', async () => {
      const bytes = await run(launcher, scratch, {
        command: probe('containment/nested-out.mjs', 'bytes'),
        outDir: await freshOutDir(scratch, `nested-bytes-${backend}`),
        limits: limits({ maxOutBytes: 8 * MiB, wallMs: 60_000 }),
      });
      // Under a root daemon the kernel refuses the write at the cap and the probe may die of it
      // before a poll stops it: either way the exit record says /out overflowed.
      if (!IS_ROOT) expect(bytes.exit.reason).toBe('output_cap');
      expect(bytes.exit.outDirOverflow).toBe(`more than ${8 * MiB} bytes in /out`);
      const files = await run(launcher, scratch, {
        command: probe('containment/nested-out.mjs', 'files'),
        outDir: await freshOutDir(scratch, `nested-files-${backend}`),
        limits: limits({ maxOutFiles: 20, wallMs: 60_000 }),
      });
      if (!IS_ROOT) expect(files.exit.reason).toBe('output_cap');
      expect(files.exit.outDirOverflow).toBe('more than 20 files in /out');
    });

    it('/out filled past its cap right before a clean exit (between two polls) is still reported', async () => {
      const burst = await run(launcher, scratch, {
        command: probe('containment/out-burst.mjs', '12'),
        outDir: await freshOutDir(scratch, `burst-${backend}`),
        limits: limits({ maxOutBytes: 8 * MiB, wallMs: 60_000 }),
      });
      // Usually the probe is gone before the first poll (exited 0); on a loaded host a poll may
      // catch it mid-write (output_cap). Either way the exit record must say /out overflowed.
      expect(burst.exit.outDirOverflow).toBe(`more than ${8 * MiB} bytes in /out`);
    });

    it('the wall timeout kills', async () => {
      const { exit, stdout } = await run(launcher, scratch, {
        command: probe('sleep.mjs'),
        limits: limits({ wallMs: 1_500, idleMs: 60_000, killGraceMs: 1_000 }),
      });
      expect(exit.reason).toBe('wall_timeout');
      expect(stdout).toBe('ready\n');
      expect(exit.durationMs).toBeGreaterThanOrEqual(1_500);
      expect(exit.durationMs).toBeLessThan(10_000);
    });
  });
}
