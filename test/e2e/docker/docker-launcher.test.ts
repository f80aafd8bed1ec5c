/**
 * The Docker launcher against the real engine: readiness answers, the hardening the engine
 * actually applied, the child image, the lifecycle (exit codes, caps, timeouts, kill, abort),
 * removal after collection, orphan reaping and launch failures. Containment itself is proven by
 * the shared suite in test/e2e/containment (run against every backend).
 */
import { DEFAULT_SANDBOX_UIDS } from '../../../src/launcher/uid-pool.js';
import { once } from 'node:events';
import { chmod, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FusionError } from '../../../src/errors.js';
import { silentLogger } from '../../../src/log.js';
import { type DockerLauncher } from '../../../src/launcher/docker.js';
import { CHILD_IMAGE, LABELS } from '../../../src/launcher/docker-config.js';
import { captureLogs, createTestDockerLauncher, describeBackend, freshOutDir, limits, makeScratch, PROBES_DIR, probe, report, run, TEST_OWNER, type Scratch } from '../containment/helpers.js';
import { waitFor } from '../../helpers/wait.js';

const MiB = 1024 * 1024;
const docker = new Docker({ socketPath: '/var/run/docker.sock' });
const status = await createTestDockerLauncher(silentLogger()).check();

async function containersOf(owner: string): Promise<Docker.ContainerInfo[]> {
  return docker.listContainers({ all: true, filters: JSON.stringify({ label: [`${LABELS.owner}=${owner}`] }) });
}

it('check() answers within 1 s when the engine is absent, and says what to do', async () => {
  const missing = createTestDockerLauncher(silentLogger(), { socketPath: '/nonexistent/docker.sock' });
  let started = performance.now();
  let check = await missing.check();
  expect(performance.now() - started).toBeLessThan(1_000);
  expect(check.ok).toBe(false);
  expect(check.reason).toMatch(/Docker engine not reachable.*start dockerd.*apt-get install docker\.io/);

  // A socket that accepts and never answers (a hung engine): still bounded.
  const dir = await mkdtemp(join(tmpdir(), 'fusion-hung-'));
  const socketPath = join(dir, 'docker.sock');
  const server = net.createServer(() => undefined);
  server.listen(socketPath);
  await once(server, 'listening');
  try {
    started = performance.now();
    check = await createTestDockerLauncher(silentLogger(), { socketPath }).check();
    expect(performance.now() - started).toBeLessThan(1_500);
    expect(check.reason).toMatch(/Docker engine not reachable/);
  } finally {
    server.close();
    await rm(dir, { recursive: true, force: true });
  }
});

describeBackend('docker launcher', status, () => {
  let scratch: Scratch;
  let launcher: DockerLauncher;
  const logs = captureLogs();

  beforeAll(async () => {
    scratch = await makeScratch('fusion-docker-');
    launcher = createTestDockerLauncher(logs.log);
  });

  afterAll(async () => {
    await scratch.cleanup();
  });

  it('check(): ok with the child image; a missing image names `make image`', async () => {
    // Ok (a stale-image warning is allowed: child-image-label.test.ts covers it).
    expect(await launcher.check()).toMatchObject({ ok: true });
    const check = await createTestDockerLauncher(silentLogger(), { image: 'fusion-child:0.0.0-missing' }).check();
    expect(check).toEqual({ ok: false, reason: 'child image fusion-child:0.0.0-missing missing; run make image' });
  });

  it('the child image runs node as 65534 and contains the built child (usable without a code bind)', async () => {
    const info = await docker.getImage(CHILD_IMAGE).inspect();
    expect(info.Config.User).toBe('65534:65534');
    expect(info.Config.Labels?.['org.fusion.child']).toBe('1');
    expect(info.Config.Env).toEqual(['PATH=/usr/local/bin:/usr/bin:/bin']);
    // No code dir bound: the image's own /opt/fusion/sandbox/child-main.js runs (and fails on the missing request).
    const { exit, stderr } = await run(launcher, scratch, { command: ['node', '/opt/fusion/sandbox/child-main.js'], codeDir: undefined });
    expect(exit).toMatchObject({ reason: 'exited', exitCode: 1 });
    expect(stderr).toMatch(/"code":"invalid_input".*request\.json/);
  });

  it('the engine applied every hardening flag, the labels and the limits', async () => {
    let stdout = '';
    const handle = await launcher.launch({
      taskId: 'task-flags', label: 'candidate-1.attempt-2', repoDir: scratch.repoDir, outDir: scratch.outDir, codeDir: PROBES_DIR,
      command: probe('sleep.mjs'), limits: limits({ memoryBytes: 300 * MiB, maxProcesses: 50, tmpfsBytes: 8 * MiB }),
      onStdout: (c) => {
        stdout += c.toString();
      },
    });
    try {
      await waitFor('the probe to say ready', () => stdout.includes('ready'), 10_000);
      const [info] = (await containersOf(TEST_OWNER)).filter((c) => c.Labels[LABELS.taskId] === 'task-flags');
      expect(info?.Labels).toMatchObject({ [LABELS.sandbox]: '1', [LABELS.attempt]: 'candidate-1.attempt-2' });
      const inspect = await docker.getContainer(info!.Id).inspect();
      const host = inspect.HostConfig as Record<string, any>;
      expect(host).toMatchObject({
        NetworkMode: 'none', ReadonlyRootfs: true, CapDrop: ['ALL'], PidsLimit: 50, Memory: 300 * MiB, MemorySwap: 300 * MiB,
        NanoCpus: 1e9, Init: true, IpcMode: 'none', CgroupnsMode: 'private', Privileged: false,
      });
      expect(host.SecurityOpt[0]).toBe('no-new-privileges:true');
      expect(host.SecurityOpt[1]).toMatch(/^seccomp=\{"defaultAction":"SCMP_ACT_ALLOW".*io_uring_setup/);
      expect(host.Tmpfs['/tmp']).toMatch(/noexec/);
      // Under root: the uid leased for this sandbox alone (gid = uid), recorded on a label too.
      const [uid, gid] = inspect.Config.User.split(':').map(Number);
      expect(gid).toBe(uid);
      if (process.getuid?.() === 0) {
        expect(uid).toBeGreaterThanOrEqual(DEFAULT_SANDBOX_UIDS.start);
        expect(uid).toBeLessThanOrEqual(DEFAULT_SANDBOX_UIDS.end);
      }
      expect(info?.Labels[LABELS.uid]).toBe(String(uid));
      expect(inspect.State.Pid).toBeGreaterThan(0);
      expect(handle.pid).toBe(inspect.State.Pid);
    } finally {
      await handle.kill();
    }
  });

  it("negative control: under Docker's default seccomp profile io_uring_setup and ptrace succeed (so the containment probes do detect a missing profile)", async () => {
    const container = await docker.createContainer({
      Image: CHILD_IMAGE, Cmd: ['node', '/opt/fusion/syscalls.mjs'], User: '65534:65534', AttachStdout: true,
      HostConfig: { NetworkMode: 'none', Binds: [`${PROBES_DIR}:/opt/fusion:ro`] },
    });
    try {
      const stream = await container.attach({ stream: true, stdout: true, stderr: true });
      let raw = Buffer.alloc(0);
      stream.on('data', (d: Buffer) => {
        raw = Buffer.concat([raw, d]);
      });
      await container.start();
      await container.wait();
      let text = '';
      for (let at = 0; at + 8 <= raw.length; at += 8 + raw.readUInt32BE(at + 4)) text += raw.subarray(at + 8, at + 8 + raw.readUInt32BE(at + 4)).toString();
      const r = JSON.parse(text) as Record<string, string>;
      expect(r.io_uring_setup).toMatch(/^ret=\d+$/);
      expect(r.ptrace_traceme).toBe('ret=0');
      expect(r.socket_inet).toMatch(/^ret=\d+$/);
    } finally {
      await container.remove({ force: true });
    }
  });

  it('/tmp is noexec', async () => {
    const r = report<{ exec: string }>(await run(launcher, scratch, { command: probe('containment/tmp-fill.mjs'), limits: limits({ tmpfsBytes: 2 * MiB }) }));
    expect(r.exec).toBe('EACCES');
  });

  it('reports exit codes and stream tails; the container is removed after collection', async () => {
    const { exit, stdout, stderr } = await run(launcher, scratch, { command: probe('exit-code.mjs', '3'), taskId: 'task-exit' });
    expect(exit).toMatchObject({ reason: 'exited', exitCode: 3, signal: null, stdoutTail: 'out line\n', stderrTail: 'err line\n', stdoutBytes: 9, stderrBytes: 9 });
    expect(stdout).toBe('out line\n');
    expect(stderr).toBe('err line\n');
    expect((await containersOf(TEST_OWNER)).filter((c) => c.Labels[LABELS.taskId] === 'task-exit')).toEqual([]);
  });

  it('a child killed by a signal is reported as signaled', async () => {
    const { exit } = await run(launcher, scratch, { command: ['node', '-e', "process.kill(process.pid, 'SIGSEGV')"] });
    expect(exit).toMatchObject({ reason: 'signaled', signal: 'SIGSEGV', exitCode: 139 });
  });

  it('the request is a private read-only copy, readable whatever its host mode, removed afterwards', async () => {
    const requestFile = join(scratch.root, 'request.json');
    await writeFile(requestFile, '{"kind":"probe"}', { mode: 0o600 });
    const before = (await readdir(tmpdir())).filter((n) => n.startsWith('fusion-docker-')).length;
    const r = report(await run(launcher, scratch, { command: probe('inspect.mjs'), requestFile }));
    expect(r.request).toBe('{"kind":"probe"}');
    const after = (await readdir(tmpdir())).filter((n) => n.startsWith('fusion-docker-')).length;
    expect(after).toBeLessThanOrEqual(before);
    const write = await run(launcher, scratch, { command: ['node', '-e', "try{require('fs').writeFileSync('/run/fusion/request.json','x')}catch(e){console.log(e.code)}"], requestFile });
    expect(write.stdout.trim()).toBe('EROFS');
  });

  it('the stdout cap kills with reason output_cap and delivers no byte beyond it', async () => {
    const { exit, stdout } = await run(launcher, scratch, { command: probe('flood.mjs'), limits: limits({ maxStdoutBytes: 256 * 1024 }) });
    expect(exit.reason).toBe('output_cap');
    expect(Buffer.byteLength(stdout)).toBe(256 * 1024);
    expect(exit.stdoutBytes).toBeGreaterThan(256 * 1024);
  });

  it('the stderr cap kills with reason output_cap', async () => {
    const { exit, stderr } = await run(launcher, scratch, { command: probe('flood.mjs', 'stderr'), limits: limits({ maxStderrBytes: 128 * 1024 }) });
    expect(exit.reason).toBe('output_cap');
    expect(Buffer.byteLength(stderr)).toBe(128 * 1024);
  });

  it('the idle timeout kills a silent child; markActivity() keeps one alive', async () => {
    const idle = await run(launcher, scratch, { command: probe('sleep.mjs'), limits: limits({ idleMs: 1_000 }) });
    expect(idle.exit.reason).toBe('idle_timeout');
    expect(idle.stdout).toBe('ready\n');
    expect(idle.exit.durationMs).toBeGreaterThanOrEqual(1_000);
    expect(idle.exit.durationMs).toBeLessThan(10_000);
    let timer: NodeJS.Timeout | undefined;
    const kept = await run(launcher, scratch, { command: probe('sleep.mjs', '2500'), limits: limits({ idleMs: 1_000 }) }, (handle) => {
      timer = setInterval(() => handle.markActivity(), 300);
    });
    clearInterval(timer);
    expect(kept.exit).toMatchObject({ reason: 'exited', exitCode: 0 });
    expect(kept.stdout).toBe('ready\nwoke\n');
  });

  it('the wall timeout kills a child that keeps talking', async () => {
    const { exit, stdout } = await run(launcher, scratch, { command: probe('chatty.mjs', '100'), limits: limits({ wallMs: 1_500 }) });
    expect(exit.reason).toBe('wall_timeout');
    expect(stdout).toContain('tick');
    expect(exit.durationMs).toBeGreaterThanOrEqual(1_500);
    expect(exit.durationMs).toBeLessThan(10_000);
  });

  it('kill(): SIGTERM first, SIGKILL after the grace period for a child that ignores SIGTERM', async () => {
    const graceMs = 1_500;
    let stdout = '';
    const handle = await launcher.launch({
      taskId: 'task-e2e', label: 'sigterm', repoDir: scratch.repoDir, outDir: scratch.outDir, codeDir: PROBES_DIR,
      command: probe('ignore-sigterm.mjs'), limits: limits({ killGraceMs: graceMs }),
      onStdout: (chunk) => {
        stdout += chunk.toString('utf8');
      },
    });
    await waitFor('the probe to say ready', () => stdout.includes('ready'), 10_000);
    const started = performance.now();
    await handle.kill('aborted');
    const elapsed = performance.now() - started;
    const exit = await handle.exit;
    expect(stdout).toContain('got SIGTERM, ignoring it');
    expect(exit).toMatchObject({ reason: 'aborted', signal: 'SIGKILL' });
    expect(elapsed).toBeGreaterThanOrEqual(graceMs - 50);
    expect(elapsed).toBeLessThan(graceMs + 5_000);
  });

  it('an abort signal kills the sandbox; an aborted signal refuses to launch', async () => {
    const controller = new AbortController();
    const pending = run(launcher, scratch, { command: probe('sleep.mjs'), signal: controller.signal });
    setTimeout(() => controller.abort(), 500);
    const { exit } = await pending;
    expect(exit.reason).toBe('aborted');
    await expect(run(launcher, scratch, { command: probe('sleep.mjs'), signal: AbortSignal.abort() })).rejects.toMatchObject({ code: 'cancelled' });
  });

  it('runs three sandboxes at once, each with its own /out', async () => {
    const outs = await Promise.all([1, 2, 3].map((i) => freshOutDir(scratch, `parallel-${i}`)));
    const results = await Promise.all(outs.map((outDir, i) => run(launcher, scratch, {
      outDir, label: `candidate-${i + 1}`, command: ['node', '-e', `require('fs').writeFileSync('/out/me', '${i + 1}'); console.log(require('fs').readdirSync('/out').join())`],
    })));
    expect(results.map((r) => r.stdout.trim())).toEqual(['me', 'me', 'me']);
  });

  it('launch failures: missing outDir is launch_failed (not retryable); a missing image is sandbox_unavailable', async () => {
    const err = await run(launcher, scratch, { taskId: 'task-fail', command: probe('exit-code.mjs'), outDir: join(scratch.root, 'nope') }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FusionError);
    expect(err).toMatchObject({ code: 'launch_failed', retryable: false });
    const noImage = createTestDockerLauncher(silentLogger(), { image: 'fusion-child:0.0.0-missing' });
    await expect(run(noImage, scratch, { taskId: 'task-fail', command: probe('exit-code.mjs') })).rejects.toMatchObject({ code: 'sandbox_unavailable', message: expect.stringMatching(/run make image/) });
    // docker-init (pid 1) starts, then cannot exec the command: an ordinary exit 127 with its message.
    const broken = await run(launcher, scratch, { taskId: 'task-fail', command: ['/nonexistent-binary'] });
    expect(broken.exit).toMatchObject({ reason: 'exited', exitCode: 127 });
    expect(broken.stderr).toMatch(/exec \/nonexistent-binary failed/);
    expect((await containersOf(TEST_OWNER)).filter((c) => c.Labels[LABELS.taskId] === 'task-fail')).toEqual([]);
  });

  it('reapOrphans() removes labelled containers no live task owns, and spares live ones', async () => {
    const owner = `reap-${process.pid}`;
    const previous = createTestDockerLauncher(silentLogger(), { owner });
    const spec = { repoDir: scratch.repoDir, outDir: scratch.outDir, codeDir: PROBES_DIR, command: probe('sleep.mjs'), limits: limits() };
    const orphan = await previous.launch({ ...spec, taskId: 'task-dead', label: 'candidate-1' });
    const kept = await previous.launch({ ...spec, taskId: 'task-live', label: 'candidate-2' });
    // "Restart": a new launcher for the same owner; task-live is still owned by a live task.
    const restarted = createTestDockerLauncher(silentLogger(), { owner });
    // Its own running containers are never reaped by the launcher that runs them.
    expect(await previous.reapOrphans(new Set())).toEqual([]);
    const reaped = await restarted.reapOrphans(new Set(['task-live']));
    expect(reaped).toHaveLength(1);
    const remaining = await containersOf(owner);
    expect(remaining.map((c) => c.Labels[LABELS.taskId])).toEqual(['task-live']);
    // The old handle notices its container is gone.
    expect((await orphan.exit).reason).not.toBe('exited');
    await kept.kill();
    expect(await containersOf(owner)).toEqual([]);
  });

  it('logs exactly one line per launch and one per exit', async () => {
    const before = logs.lines().length;
    await run(launcher, scratch, { command: probe('exit-code.mjs', '3'), label: 'log-probe' });
    const lines = logs.lines().slice(before).filter((l) => l.label === 'log-probe');
    expect(lines.map((l) => l.msg)).toEqual(['sandbox launched', 'sandbox exited']);
    expect(lines[0]).toMatchObject({ component: 'launcher', launcher: 'docker', taskId: 'task-e2e' });
    expect(lines[1]).toMatchObject({ reason: 'exited', exitCode: 3 });
  });

  it('a repository directory that denies the sandbox uid is a clear launch_failed', async () => {
    const dir = await mkdtemp(join(scratch.root, 'private-repo-'));
    await chmod(dir, 0o700);
    const err = await run(launcher, scratch, { command: probe('exit-code.mjs'), repoDir: dir }).catch((e: unknown) => e);
    if (process.getuid?.() === 0) expect(err).toMatchObject({ code: 'launch_failed', message: expect.stringMatching(/repoDir .* not usable by uid \d+/) });
  });
});
