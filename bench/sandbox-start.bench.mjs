// Child start overhead per sandbox backend (isolation tier: bwrap, docker, gvisor), measured
// against bare runs of the same runtime in the same process.
//
// For each usable backend, N times:
//   launcherFirstRequestMs  launcher.launch() called → the child's first request arrives on a
//                           Unix socket bound exactly like the broker socket (node connects to
//                           /run/fusion/broker.sock and writes one byte): what a candidate waits.
//   launchReturnMs          launch() called → launch() resolved.
//   launcherTotalMs         launch() called → exit resolved (container/cgroup cleaned up).
// Baselines, same run:
//   bare docker: `docker run --rm --network none IMAGE node -e 0` (wall time of the CLI);
//   bare gvisor: `docker run --rm --runtime runsc --network none --security-opt seccomp=unconfined
//                IMAGE node -e 0` (Docker's default profile, applied inside by --oci-seccomp,
//                answers clone3 with ENOSYS, which aborts Node under runsc 20221219; the
//                launcher's own profile leaves clone3 to gVisor, see src/launcher/gvisor.ts);
//   bare bwrap:  `bwrap --unshare-all --die-with-parent <ro /usr …> node -e 0`.
// Ratios are launcher first-request median / bare median (bare includes exit and removal, the
// launcher number stops at the first request; both include one node start-up).
//
// As root, every launcher start includes leasing the sandbox's own uid and (bwrap) the private
// binds of the repository and code (src/launcher/uid-pool.ts, private-binds.ts).
//
// Docker only: the same hardened container created ahead of time (created, not started) and
// timed from start to first request (precreatedFirstRequestMs), next to the creation cost
// (createMs): what a pool of pre-created containers could save. Driven through the engine's
// HTTP API with node:http, so dockerode stays confined to src/launcher/docker.ts.
//
// Needs dist/ (make build), bubblewrap, and the Docker engine with the child image (make image).
// BENCH_SANDBOX_ITERATIONS (default 10) sets N; BENCH_SANDBOX_TIERS (default `bwrap,docker,gvisor`)
// picks the tiers measured (the others are reported as skipped by request).
/* global console */
import { iterations as iterationCount } from './short.mjs';
import { Buffer } from 'node:buffer';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chown, mkdir, mkdtemp, rm, writeFile, chmod } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { createBwrapLauncher } from '../dist/src/launcher/bwrap.js';
import { DEFAULT_DOCKER_SOCKET, createDockerLauncher } from '../dist/src/launcher/docker.js';
import { CHILD_IMAGE, containerConfig } from '../dist/src/launcher/docker-config.js';
import { dockerSeccompSecurityOpt, hostSeccompArch } from '../dist/src/launcher/docker-seccomp.js';
import { createGvisorLauncher } from '../dist/src/launcher/gvisor.js';
import { DEFAULT_SANDBOX_LIMITS } from '../dist/src/launcher/port.js';
import { DEFAULT_SANDBOX_UIDS } from '../dist/src/launcher/uid-pool.js';
import { silentLogger } from '../dist/src/log.js';

const IS_ROOT = process.getuid?.() === 0;
/** The pre-created containers' uid: the default range's last id (the launcher's pool starts at random). */
const PRECREATED_UID = IS_ROOT ? DEFAULT_SANDBOX_UIDS.end : process.getuid();
const CHILD_SCRIPT = "require('net').connect('/run/fusion/broker.sock').end('x')";

function stats(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  const round = (x) => Math.round(x * 10) / 10;
  return { median: round(at(0.5)), p90: round(at(0.9)), min: round(sorted[0]), max: round(sorted[sorted.length - 1]), n: sorted.length };
}

function timeCommand(file, args) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`${file} exited ${code}: ${stderr.slice(0, 300)}`))));
  });
}

/** A Unix server standing in for the broker; `next()` resolves at the next first byte. */
async function brokerStandIn(dir) {
  const socketPath = join(dir, 'broker.sock');
  let waiter;
  const server = net.createServer((socket) => {
    socket.once('data', () => waiter?.(performance.now()));
    socket.on('error', () => undefined);
  });
  server.listen(socketPath);
  await once(server, 'listening');
  await chmod(socketPath, 0o600); // each launch hands it to that sandbox's own uid
  return {
    socketPath,
    next: () => new Promise((resolve) => { waiter = resolve; }),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function scratchDirs() {
  const root = await mkdtemp(join(tmpdir(), 'fusion-bench-'));
  await chmod(root, 0o755);
  const repoDir = join(root, 'repo');
  const outDir = join(root, 'out');
  const sockDir = join(root, 'sock');
  await mkdir(repoDir, { mode: 0o755 });
  await writeFile(join(repoDir, 'README.md'), '# bench\n', { mode: 0o644 });
  await mkdir(outDir, { mode: 0o700 });
  await mkdir(sockDir, { mode: 0o711 }); // as the workflow's staging: traversable, root's
  return { root, repoDir, outDir, sockDir };
}

async function measureLauncher(launcher, dirs, broker, iterations) {
  const firstRequest = [];
  const launchReturn = [];
  const total = [];
  for (let i = 0; i < iterations + 1; i += 1) {
    const arrived = broker.next();
    const started = performance.now();
    const handle = await launcher.launch({
      taskId: 'bench', label: `start-${i}`, repoDir: dirs.repoDir, outDir: dirs.outDir, brokerSocketPath: broker.socketPath,
      command: ['node', '-e', CHILD_SCRIPT], env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/tmp' },
      limits: { ...DEFAULT_SANDBOX_LIMITS, wallMs: 60_000 },
    });
    const returned = performance.now();
    const at = await arrived;
    const exit = await handle.exit;
    if (exit.reason !== 'exited' || exit.exitCode !== 0) throw new Error(`${launcher.name} bench child failed: ${JSON.stringify(exit)}`);
    if (i === 0) continue; // warm-up
    launchReturn.push(returned - started);
    firstRequest.push(at - started);
    total.push(performance.now() - started);
  }
  return { launcherFirstRequestMs: stats(firstRequest), launchReturnMs: stats(launchReturn), launcherTotalMs: stats(total) };
}

async function benchBwrap(dirs, broker, iterations) {
  const launcher = createBwrapLauncher({ log: silentLogger() });
  const check = await launcher.check();
  if (!check.ok) return { skipped: check.reason };
  const measured = await measureLauncher(launcher, dirs, broker, iterations);
  const bareArgs = ['--ro-bind', '/usr', '/usr', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--symlink', 'usr/bin', '/bin',
    '--proc', '/proc', '--dev', '/dev', '--unshare-all', '--die-with-parent', process.execPath, '-e', '0'];
  const bare = [];
  for (let i = 0; i < iterations + 1; i += 1) {
    const ms = await timeCommand('/usr/bin/bwrap', bareArgs);
    if (i > 0) bare.push(ms);
  }
  const bareMs = stats(bare);
  return { mechanism: await launcher.limitMechanism(), ...measured, bareMs, ratioFirstRequestToBare: Math.round((measured.launcherFirstRequestMs.median / bareMs.median) * 100) / 100 };
}

/** One call to the engine API over its Unix socket. */
function engine(method, path, body) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const req = http.request({ socketPath: DEFAULT_DOCKER_SOCKET, method, path, headers: payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {} }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => (res.statusCode >= 300 ? reject(new Error(`${method} ${path}: ${res.statusCode} ${text}`)) : resolve(text ? JSON.parse(text) : null)));
    });
    req.once('error', reject);
    req.end(payload);
  });
}

async function benchDocker(dirs, broker, iterations) {
  const launcher = createDockerLauncher({ log: silentLogger(), owner: 'bench' });
  const check = await launcher.check();
  if (!check.ok) return { skipped: check.reason };
  const measured = await measureLauncher(launcher, dirs, broker, iterations);
  const bare = [];
  for (let i = 0; i < iterations + 1; i += 1) {
    const ms = await timeCommand('docker', ['run', '--rm', '--network', 'none', CHILD_IMAGE, 'node', '-e', '0']);
    if (i > 0) bare.push(ms);
  }
  // Pre-created: the launcher's own configuration, created ahead, timed from start.
  const arch = hostSeccompArch();
  const create = [];
  const precreated = [];
  for (let i = 0; i < iterations + 1; i += 1) {
    const config = containerConfig({
      spec: { taskId: 'bench', label: `pre-${i}`, repoDir: dirs.repoDir, outDir: dirs.outDir, brokerSocketPath: broker.socketPath,
        command: ['node', '-e', CHILD_SCRIPT], env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/tmp' }, limits: DEFAULT_SANDBOX_LIMITS },
      image: CHILD_IMAGE, identity: { uid: PRECREATED_UID, gid: PRECREATED_UID, dropPrivileges: IS_ROOT },
      nanoCpus: 1e9, owner: 'bench', seccompOpt: dockerSeccompSecurityOpt(arch),
    });
    const { name, ...body } = config;
    if (IS_ROOT) for (const path of [broker.socketPath, dirs.outDir]) await chown(path, PRECREATED_UID, PRECREATED_UID);
    let started = performance.now();
    const { Id: id } = await engine('POST', `/containers/create?name=${encodeURIComponent(name)}`, body);
    const createdMs = performance.now() - started;
    const arrived = broker.next();
    started = performance.now();
    await engine('POST', `/containers/${id}/start`);
    const at = await arrived;
    await engine('POST', `/containers/${id}/wait`);
    await engine('DELETE', `/containers/${id}?force=true`);
    if (i === 0) continue;
    create.push(createdMs);
    precreated.push(at - started);
  }
  const bareMs = stats(bare);
  const precreatedFirstRequestMs = stats(precreated);
  return {
    image: CHILD_IMAGE, ...measured, bareMs,
    ratioFirstRequestToBare: Math.round((measured.launcherFirstRequestMs.median / bareMs.median) * 100) / 100,
    createMs: stats(create), precreatedFirstRequestMs,
    precreatedSavingMs: Math.round((measured.launcherFirstRequestMs.median - precreatedFirstRequestMs.median) * 10) / 10,
  };
}

async function benchGvisor(dirs, broker, iterations) {
  const launcher = createGvisorLauncher({ log: silentLogger(), owner: 'bench' });
  const check = await launcher.check();
  if (!check.ok) return { skipped: check.reason };
  const measured = await measureLauncher(launcher, dirs, broker, iterations);
  const bare = [];
  for (let i = 0; i < iterations + 1; i += 1) {
    const ms = await timeCommand('docker', ['run', '--rm', '--runtime', 'runsc', '--network', 'none', '--security-opt', 'seccomp=unconfined', CHILD_IMAGE, 'node', '-e', '0']);
    if (i > 0) bare.push(ms);
  }
  const bareMs = stats(bare);
  return { image: CHILD_IMAGE, runtime: 'runsc', ...measured, bareMs, ratioFirstRequestToBare: Math.round((measured.launcherFirstRequestMs.median / bareMs.median) * 100) / 100 };
}

/** Every tier must be usable (bench/run.mjs skips loudly locally, fails in CI). */
export async function prerequisites() {
  const missing = [];
  const bwrap = await createBwrapLauncher({ log: silentLogger() }).check();
  if (!bwrap.ok) missing.push(`bwrap: ${bwrap.reason}`);
  const docker = await createDockerLauncher({ log: silentLogger(), owner: 'bench' }).check();
  if (!docker.ok) missing.push(`docker: ${docker.reason}`);
  const gvisor = await createGvisorLauncher({ log: silentLogger(), owner: 'bench' }).check();
  if (!gvisor.ok) missing.push(`gvisor: ${gvisor.reason}`);
  return missing;
}

export default async function run() {
  const iterations = iterationCount('BENCH_SANDBOX_ITERATIONS', 10, 3);
  const dirs = await scratchDirs();
  const broker = await brokerStandIn(dirs.sockDir);
  try {
    const tiers = (process.env.BENCH_SANDBOX_TIERS ?? 'bwrap,docker,gvisor').split(',').map((t) => t.trim());
    const measure = (tier, fn) => (tiers.includes(tier) ? fn(dirs, broker, iterations).catch((err) => ({ error: err.message })) : { skipped: 'not in BENCH_SANDBOX_TIERS' });
    const bwrap = await measure('bwrap', benchBwrap);
    const docker = await measure('docker', benchDocker);
    const gvisor = await measure('gvisor', benchGvisor);
    return { name: 'sandbox-start', iterations, unit: 'ms', bwrap, docker, gvisor };
  } finally {
    await broker.close();
    await rm(dirs.root, { recursive: true, force: true });
  }
}

// `node bench/sandbox-start.bench.mjs` runs it alone.
if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify(await run(), null, 2));
}
