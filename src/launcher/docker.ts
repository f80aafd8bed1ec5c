/**
 * The Docker `Launcher` (runc): one hardened, throw-away container per attempt. The only module
 * that imports dockerode; nothing above it sees a dockerode error.
 *
 * What the child gets (see `containerConfig`): the child image (Node + the built sandbox/ code,
 * `Dockerfile.child`), no network at all (`NetworkMode: none`: only `lo`), a read-only root, no
 * capabilities, no_new_privs, the project's seccomp profile (`docker-seccomp.ts`, generated from
 * the bwrap filter's policy), an unprivileged uid (one leased per sandbox when the daemon is
 * root, else the daemon's own uid, like bwrap), docker-init as pid 1 (reaps zombies, forwards signals), private
 * pid/IPC/cgroup/UTS namespaces (IPC without /dev/shm), a pids cap, memory = memory+swap, a CPU
 * share, a size-capped noexec tmpfs /tmp (with /out the only writable places), and exactly
 * `spec.env` plus PATH (Docker itself adds HOSTNAME and, unless given, HOME). Binds: /repo ro,
 * /out rw, /opt/fusion ro (the host code dir, so one spec works for both backends), the broker
 * socket and a private read-only copy of the request.
 *
 * The broker socket is bound as a file, not its directory: /run/fusion/request.json lives
 * beside it, and a file bound into a host directory would make runc create its mount point
 * inside that directory on the host.
 *
 * Lifecycle: create → attach (before start, so no output is lost) → start → wait → inspect →
 * remove. Wall and idle timeouts, output caps and `kill()` send SIGTERM (docker-init forwards
 * it), then SIGKILL after `killGraceMs`. Containers carry labels (owner, task id, attempt) so a
 * restarted daemon can reap the ones nobody owns (`reapOrphans`).
 */
import { randomUUID } from 'node:crypto';
import { chmod, chown, copyFile, mkdtemp, rm, stat } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import { untrusted } from '../log.js';
import { dockerSeccompSecurityOpt, hostSeccompArch } from './docker-seccomp.js';
import { SANDBOX_PATHS, type Launcher, type LauncherCheck, type SandboxExit, type SandboxExitReason, type SandboxHandle, type SandboxSpec } from './port.js';
import { validateSpec } from './validate-spec.js';
import { Tail, signalName } from './process-output.js';
import { ACCESS, permittedBits, resolveSandboxIdentity, type SandboxIdentity } from './sandbox-user.js';
import { leaseIdentity } from './sandbox-lease.js';
import { defaultUidPool, type UidPool } from './uid-pool.js';

export const DEFAULT_DOCKER_SOCKET = '/var/run/docker.sock';
export const CHILD_IMAGE_LABEL = 'org.fusion.child';
export const LABELS = { sandbox: 'org.fusion.sandbox', owner: 'org.fusion.owner', taskId: 'org.fusion.task-id', attempt: 'org.fusion.attempt', uid: 'org.fusion.uid' } as const;
const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';
const TAIL_BYTES = 4096;
const CHECK_TIMEOUT_MS = 1_000;
const ENGINE_CALL_TIMEOUT_MS = 30_000;
const ENGINE_HINT = 'start dockerd (`systemctl start docker`, or `make system-deps-docker` as root) / apt-get install docker.io';
const TRANSIENT_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EAGAIN', 'ENOENT', 'EMFILE', 'ENFILE', 'ABORT_ERR']);

/** The package version, read from the nearest package.json above this module (src/ or dist/src/). */
function packageVersion(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'fusion-supervisor' && pkg.version) return pkg.version;
    } catch {
      // not here
    }
    if (dir === dirname(dir)) return '0.0.0';
  }
}

/** `fusion-child:<package version>`, what `make image` builds. */
export function childImage(version: string = packageVersion()): string {
  return `fusion-child:${version}`;
}
export const CHILD_IMAGE = childImage();

export interface DockerLauncherOptions {
  log: Logger;
  /** Default `CHILD_IMAGE`. */
  image?: string;
  /** A ready client (tests, remote engines); default one on `socketPath`. */
  docker?: Docker;
  /** Default /var/run/docker.sock. */
  socketPath?: string;
  /** Where a root daemon leases each sandbox's uid (default: the process-wide pool). */
  uidPool?: UidPool;
  /** OCI runtime (`runsc` for the gVisor tier, see gvisor.ts); default the engine's (runc). */
  runtime?: string;
  /** Host tasks the runtime needs beyond the child's processes (gvisor.ts). */
  pidsHeadroom?: number;
  /** Replaces the seccomp security option derived from the policy (gvisor.ts adapts it to runsc). */
  seccompOpt?: (policyOpt: string) => string;
  /** The backend name this launcher reports (`gvisor` when built by gvisor.ts). */
  name?: 'docker' | 'gvisor';
  /** CPU share per child in CPUs (default 1). */
  cpus?: number;
  /** Label value separating this daemon's containers from other daemons' on the same engine. */
  owner?: string;
  /** Where private request copies are staged (default os.tmpdir()). */
  scratchDir?: string;
}

export interface DockerLauncher extends Launcher {
  readonly image: string;
  /** Removes this owner's labelled containers that no live task owns; returns their ids. */
  reapOrphans(liveTaskIds: Set<string>): Promise<string[]>;
  /** The OCI runtimes the engine has registered (`runc`, `runsc`…). */
  runtimes(): Promise<string[]>;
}

/** Whether the engine still has a container of that name (for the uid pool's liveness check); errors count as yes. */
export function dockerContainerProbe(socketPath: string = DEFAULT_DOCKER_SOCKET): (name: string) => Promise<boolean> {
  const docker = new Docker({ socketPath });
  return (name) => docker.getContainer(name).inspect().then(() => true, (err: EngineError) => err.statusCode !== 404);
}

/** A bind mount (the dockerode types lack `NonRecursive`, API 1.40+). */
interface BindMount extends Docker.MountSettings {
  BindOptions: { Propagation: 'rprivate'; NonRecursive?: boolean };
}

interface ContainerInput {
  spec: SandboxSpec;
  image: string;
  identity: SandboxIdentity;
  nanoCpus: number;
  owner: string;
  requestCopy?: string;
  seccompOpt: string;
  runtime?: string;
  /** Host tasks the runtime itself needs in the container's pids cgroup (gVisor's Sentry and gofer). */
  pidsHeadroom?: number;
}

/** The complete create options of one sandbox container. Pure, for tests. */
export function containerConfig(input: ContainerInput): Docker.ContainerCreateOptions {
  const { spec, identity } = input;
  const { limits } = spec;
  const bind = (source: string, target: string, readOnly: boolean): BindMount => ({
    Type: 'bind', Source: source, Target: target, ReadOnly: readOnly,
    // Non-recursive: a mount below the repository never shows up (20.10 cannot make it read-only).
    BindOptions: { Propagation: 'rprivate', ...(readOnly ? { NonRecursive: true } : {}) },
  });
  const mounts: BindMount[] = [bind(spec.repoDir, SANDBOX_PATHS.repo, true), bind(spec.outDir, SANDBOX_PATHS.out, false)];
  if (spec.codeDir !== undefined) mounts.push(bind(spec.codeDir, SANDBOX_PATHS.code, true));
  if (spec.brokerSocketPath !== undefined) mounts.push(bind(spec.brokerSocketPath, SANDBOX_PATHS.brokerSocket, true));
  if (input.requestCopy !== undefined) mounts.push(bind(input.requestCopy, SANDBOX_PATHS.request, true));
  const env = { PATH: DEFAULT_PATH, ...spec.env };
  const hostConfig: Docker.HostConfig & { CgroupnsMode: string } = {
    NetworkMode: 'none',
    ReadonlyRootfs: true,
    CapDrop: ['ALL'],
    SecurityOpt: ['no-new-privileges:true', input.seccompOpt],
    PidsLimit: limits.maxProcesses + (input.pidsHeadroom ?? 0),
    Memory: limits.memoryBytes,
    MemorySwap: limits.memoryBytes,
    // Under host memory pressure the children die first, never the daemon.
    OomScoreAdj: 1000,
    NanoCpus: input.nanoCpus,
    Tmpfs: {
      [SANDBOX_PATHS.tmp]: `rw,nosuid,nodev,noexec,size=${limits.tmpfsBytes},mode=1777`,
      // Docker's writable mqueue mount would be a third writable place; hide it.
      '/dev/mqueue': 'ro,nosuid,nodev,noexec,size=4k',
    },
    Init: true,
    // A private IPC namespace without the writable /dev/shm tmpfs ('private' would mount one).
    IpcMode: 'none',
    PidMode: '',
    CgroupnsMode: 'private',
    Privileged: false,
    Mounts: mounts,
    Ulimits: [
      { Name: 'core', Soft: 0, Hard: 0 },
      // With runtime headroom in the pids cgroup, the child's own cap is the process rlimit,
      // which gVisor's Sentry enforces per sandbox (its uid is the sandbox's alone).
      ...(input.pidsHeadroom === undefined ? [] : [{ Name: 'nproc', Soft: limits.maxProcesses, Hard: limits.maxProcesses }]),
    ],
    // Output is streamed through attach; nothing is kept on the engine's disk.
    LogConfig: { Type: 'none', Config: {} },
    AutoRemove: false,
    RestartPolicy: { Name: 'no', MaximumRetryCount: 0 },
    ...(input.runtime === undefined ? {} : { Runtime: input.runtime }),
  };
  return {
    name: `fusion-${sanitize(spec.taskId)}-${sanitize(spec.label)}-${randomUUID().slice(0, 8)}`,
    Image: input.image,
    Cmd: spec.command,
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    User: `${identity.uid}:${identity.gid}`,
    WorkingDir: SANDBOX_PATHS.repo,
    Hostname: 'sandbox',
    NetworkDisabled: true,
    AttachStdin: false, AttachStdout: true, AttachStderr: true, OpenStdin: false, Tty: false,
    StopSignal: 'SIGTERM',
    Labels: { [LABELS.sandbox]: '1', [LABELS.owner]: input.owner, [LABELS.taskId]: spec.taskId, [LABELS.attempt]: spec.label, [LABELS.uid]: String(identity.uid) },
    HostConfig: hostConfig,
  };
}

function sanitize(text: string): string {
  return text.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 40);
}



/** Splits Docker's multiplexed attach stream (8-byte header: stream id, 3 zero bytes, u32 BE size). */
function demux(stream: Readable, onFrame: (kind: 'stdout' | 'stderr', payload: Buffer) => void): void {
  let pending: Buffer = Buffer.alloc(0);
  stream.on('data', (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 8) {
      const size = pending.readUInt32BE(4);
      if (pending.length < 8 + size) break;
      const kind = pending[0] === 2 ? 'stderr' : 'stdout';
      onFrame(kind, pending.subarray(8, 8 + size));
      pending = pending.subarray(8 + size);
    }
  });
}

interface EngineError {
  statusCode?: number;
  code?: string;
  message?: string;
  json?: { message?: string } | null;
}

function engineMessage(err: unknown): string {
  const e = (err ?? {}) as EngineError;
  return e.json?.message ?? e.message ?? String(err);
}

function isTransient(err: unknown): boolean {
  const e = (err ?? {}) as EngineError;
  if (e.code !== undefined && TRANSIENT_CODES.has(e.code)) return true;
  if (e.statusCode === 503) return true;
  return e.statusCode === 500 && /resource temporarily unavailable|too many open files|no space left|timeout|connection reset/i.test(engineMessage(err));
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`${what} did not answer within ${ms} ms`), { code: 'ETIMEDOUT' })), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function launchError(message: string, details: Record<string, unknown>, cause?: unknown): FusionError {
  return new FusionError('launch_failed', message, { retryable: false, details, ...(cause === undefined ? {} : { cause }) });
}

/**
 * Hands /out and the broker socket to the sandbox uid (root daemon) and checks what the child
 * opens inside: bind mounts skip host ancestors, so only the bound inode's own mode matters.
 */
async function preparePaths(spec: SandboxSpec, identity: SandboxIdentity): Promise<void> {
  const { uid, gid } = identity;
  const entries: Array<[string, string | undefined, 'dir' | 'socket', number]> = [
    ['repoDir', spec.repoDir, 'dir', ACCESS.readDir],
    ['outDir', spec.outDir, 'dir', ACCESS.writeDir],
    ['codeDir', spec.codeDir, 'dir', ACCESS.readDir],
    ['brokerSocketPath', spec.brokerSocketPath, 'socket', ACCESS.write],
  ];
  for (const [name, path, kind, need] of entries) {
    if (path === undefined) continue;
    let info = await stat(path).catch(() => null);
    if (info === null) throw launchError(`${name} ${path} does not exist`, { [name]: path });
    if (kind === 'dir' ? !info.isDirectory() : !info.isSocket()) throw launchError(`${name} ${path} is not a ${kind === 'dir' ? 'directory' : 'Unix socket'}`, { [name]: path });
    if (identity.dropPrivileges && (name === 'outDir' || name === 'brokerSocketPath')) {
      // This sandbox's uid alone: /out 0700, the socket 0600 (connect() needs write on it).
      await chown(path, uid, gid);
      await chmod(path, name === 'outDir' ? 0o700 : 0o600);
      info = await stat(path);
    }
    const have = permittedBits(info, uid, gid);
    if ((have & need) !== need) throw launchError(`${name} ${path} is not usable by uid ${uid} (mode ${(info.mode & 0o777).toString(8)})`, { [name]: path, uid });
  }
}

export function createDockerLauncher(options: DockerLauncherOptions): DockerLauncher {
  const log = options.log.child({ component: 'launcher', launcher: options.name ?? 'docker' });
  const socketPath = options.socketPath ?? DEFAULT_DOCKER_SOCKET;
  const docker = options.docker ?? new Docker({ socketPath });
  const image = options.image ?? CHILD_IMAGE;
  const owner = options.owner ?? 'default';
  const nanoCpus = Math.round((options.cpus ?? 1) * 1e9);
  const pool = options.uidPool ?? defaultUidPool();
  const identity = resolveSandboxIdentity(pool.range, { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 });
  const backendName = options.name ?? 'docker';
  const arch = hostSeccompArch();
  const seccompOpt = arch === null ? null : (options.seccompOpt ?? ((opt: string) => opt))(dockerSeccompSecurityOpt(arch));
  /** Container ids this launcher runs right now (never reaped). */
  const live = new Set<string>();

  async function check(): Promise<LauncherCheck> {
    if (seccompOpt === null) return { ok: false, reason: `no seccomp policy for architecture ${process.arch}` };
    if (options.docker === undefined && !(await stat(socketPath).then((s) => s.isSocket(), () => false))) {
      return { ok: false, reason: `Docker engine not reachable (no socket at ${socketPath}); ${ENGINE_HINT}` };
    }
    let version: { ApiVersion?: string };
    try {
      version = (await withTimeout(docker.version(), CHECK_TIMEOUT_MS, 'the Docker engine')) as { ApiVersion?: string };
    } catch (err) {
      return { ok: false, reason: `Docker engine not reachable at ${socketPath} (${untrusted(engineMessage(err), 200)}); ${ENGINE_HINT}` };
    }
    const [major = 0, minor = 0] = (version.ApiVersion ?? '0.0').split('.').map(Number);
    if (major < 1 || (major === 1 && minor < 41)) return { ok: false, reason: `Docker engine API ${version.ApiVersion ?? '?'} is too old (needs 1.41, Docker 20.10+)` };
    try {
      const info = await withTimeout(docker.getImage(image).inspect(), 5_000, 'image inspect');
      if (info.Config?.Labels?.[CHILD_IMAGE_LABEL] !== '1') return { ok: false, reason: `image ${image} is not a fusion child image (label ${CHILD_IMAGE_LABEL}=1 missing); run make image` };
    } catch (err) {
      if ((err as EngineError).statusCode === 404) return { ok: false, reason: `child image ${image} missing; run make image` };
      return { ok: false, reason: `cannot inspect image ${image}: ${untrusted(engineMessage(err), 200)}` };
    }
    return { ok: true };
  }

  async function reapOrphans(liveTaskIds: Set<string>): Promise<string[]> {
    let containers: Docker.ContainerInfo[];
    try {
      containers = await docker.listContainers({ all: true, filters: JSON.stringify({ label: [`${LABELS.sandbox}=1`, `${LABELS.owner}=${owner}`] }) });
    } catch (err) {
      throw new FusionError('sandbox_unavailable', `cannot list sandbox containers: ${untrusted(engineMessage(err), 300)}; ${ENGINE_HINT}`, { cause: err });
    }
    const reaped: string[] = [];
    for (const c of containers) {
      const taskId = c.Labels[LABELS.taskId] ?? '';
      if (live.has(c.Id) || liveTaskIds.has(taskId)) continue;
      try {
        await docker.getContainer(c.Id).remove({ force: true });
        reaped.push(c.Id);
        log.warn({ containerId: c.Id.slice(0, 12), taskId, label: c.Labels[LABELS.attempt], state: c.State }, 'orphan sandbox container removed');
      } catch (err) {
        if ((err as EngineError).statusCode !== 404) log.warn({ containerId: c.Id.slice(0, 12), reason: untrusted(engineMessage(err), 300) }, 'orphan sandbox container could not be removed');
      }
    }
    return reaped;
  }

  async function launch(spec: SandboxSpec): Promise<SandboxHandle> {
    const startedAt = performance.now();
    const base = { taskId: spec.taskId, label: spec.label };
    if (spec.signal?.aborted) throw new FusionError('cancelled', 'the launch was aborted before the sandbox started', { details: base });
    validateSpec(spec);
    let scratch: string | undefined;
    let container: Docker.Container | undefined;
    let supervised = false;
    let who: Awaited<ReturnType<typeof leaseIdentity>> | undefined;
    try {
      if (seccompOpt === null) throw new FusionError('sandbox_unavailable', `no seccomp policy for architecture ${process.arch}`);
      who = await leaseIdentity(identity, pool, spec);
      const as = who.identity;
      await preparePaths(spec, as);
      let requestCopy: string | undefined;
      if (spec.requestFile !== undefined) {
        // A private, world-readable snapshot (like bwrap's --ro-bind-data): the host file's mode does not matter.
        scratch = await mkdtemp(join(options.scratchDir ?? tmpdir(), 'fusion-docker-'));
        requestCopy = join(scratch, 'request.json');
        await copyFile(spec.requestFile, requestCopy).catch((err: NodeJS.ErrnoException) => {
          throw launchError(`requestFile ${spec.requestFile} cannot be read: ${err.code ?? err.message}`, base);
        });
        await chmod(requestCopy, 0o444);
      }
      const config = containerConfig({ spec, image, identity: as, nanoCpus, owner, seccompOpt, ...(requestCopy === undefined ? {} : { requestCopy }), ...(options.runtime === undefined ? {} : { runtime: options.runtime }), ...(options.pidsHeadroom === undefined ? {} : { pidsHeadroom: options.pidsHeadroom }) });
      if (config.name !== undefined) who.noteContainer(config.name);
      try {
        container = await docker.createContainer(config);
      } catch (err) {
        const status = (err as EngineError).statusCode;
        if (status === 404) throw new FusionError('sandbox_unavailable', `child image ${image} missing; run make image`, { cause: err, details: base });
        const transient = isTransient(err);
        const hint = (err as EngineError).code === 'ECONNREFUSED' || (err as EngineError).code === 'ENOENT' ? `; ${ENGINE_HINT}` : '';
        throw new FusionError('launch_failed', `cannot create the sandbox container: ${untrusted(engineMessage(err), 500)}${hint}`, { retryable: transient, cause: err, details: base });
      }
      live.add(container.id);
      const stream = (await container.attach({ stream: true, stdout: true, stderr: true })) as unknown as Readable;
      const handle = supervise(container, stream, spec, startedAt, scratch);
      // From here on the supervision's exit path removes the container and the scratch copy,
      // and then gives the uid back.
      supervised = true;
      const leased = who;
      void handle.exit.finally(() => leased.release());
      try {
        await container.start();
      } catch (err) {
        await handle.abandon();
        throw launchError(`cannot start the sandbox container: ${untrusted(engineMessage(err), 500)}`, base, err);
      }
      handle.started();
      log.info({ ...base, containerId: container.id.slice(0, 12), image, runtime: options.runtime ?? 'runc', uid: as.uid, gid: as.gid,
        memoryBytes: spec.limits.memoryBytes, maxProcesses: spec.limits.maxProcesses, wallMs: spec.limits.wallMs, idleMs: spec.limits.idleMs,
        launchMs: Math.round(performance.now() - startedAt) }, 'sandbox launched');
      return handle;
    } catch (err) {
      if (!supervised) {
        if (container !== undefined) {
          await container.remove({ force: true }).catch(() => undefined);
          live.delete(container.id);
        }
        if (scratch !== undefined) await rm(scratch, { recursive: true, force: true });
        who?.release();
      }
      const error = err instanceof FusionError ? err : new FusionError('launch_failed', engineMessage(err), { retryable: container === undefined && isTransient(err), cause: err, details: base });
      log.warn({ ...base, code: error.code, retryable: error.retryable, reason: untrusted(error.message, 500) }, 'sandbox launch failed');
      throw error;
    }
  }

  /** Streams, timers, caps, kill, and the exit bookkeeping (inspect, remove) of one container. */
  function supervise(container: Docker.Container, stream: Readable, spec: SandboxSpec, startedAt: number, scratch: string | undefined): SandboxHandle & { started(): void; abandon(): Promise<void> } {
    const { limits } = spec;
    const tails = { stdout: new Tail(TAIL_BYTES), stderr: new Tail(TAIL_BYTES) };
    const bytes = { stdout: 0, stderr: 0 };
    let pid: number | undefined;
    let killReason: SandboxExitReason | undefined;
    let killing = false;
    let graceTimer: NodeJS.Timeout | undefined;
    let wallTimer: NodeJS.Timeout | undefined;
    let idleTimer: NodeJS.Timeout | undefined;
    let exited = false;
    let running = false;
    let lastActivity = performance.now();
    let resolveExit: (exit: SandboxExit) => void = () => undefined;
    const exit = new Promise<SandboxExit>((resolve) => {
      resolveExit = resolve;
    });

    const signal = (name: 'SIGTERM' | 'SIGKILL'): Promise<void> => container.kill({ signal: name }).then(() => undefined, () => undefined);
    const terminate = (): void => {
      void signal('SIGTERM');
      graceTimer = setTimeout(() => void signal('SIGKILL'), limits.killGraceMs);
    };
    const kill = (reason: SandboxExitReason = 'aborted'): Promise<void> => {
      if (exited) return Promise.resolve();
      killReason ??= reason;
      if (!killing) {
        killing = true;
        // Before start() has returned (output can arrive first), signalling or removing would race
        // the engine's start; started() terminates at once instead, abandon() removes.
        if (running) terminate();
      }
      return exit.then(() => undefined);
    };

    const onFrame = (kind: 'stdout' | 'stderr', chunk: Buffer): void => {
      lastActivity = performance.now();
      const max = kind === 'stdout' ? limits.maxStdoutBytes : limits.maxStderrBytes;
      const before = bytes[kind];
      bytes[kind] = before + chunk.length;
      // Over the cap (also when an earlier chunk ended exactly on it): deliver nothing more, stop it.
      if (before >= max) {
        void kill('output_cap');
        return;
      }
      const kept = bytes[kind] > max ? chunk.subarray(0, max - before) : chunk;
      tails[kind].push(kept);
      (kind === 'stdout' ? spec.onStdout : spec.onStderr)?.(kept);
      if (bytes[kind] > max) void kill('output_cap');
    };
    demux(stream, onFrame);
    const streamEnded = new Promise<void>((resolve) => {
      stream.once('end', resolve);
      stream.once('close', resolve);
      stream.once('error', () => resolve());
    });
    const onAbort = (): void => void kill('aborted');

    async function finish(statusCode: number | null): Promise<void> {
      if (exited) return;
      exited = true;
      clearTimeout(wallTimer);
      clearTimeout(idleTimer);
      spec.signal?.removeEventListener('abort', onAbort);
      let oomKilled: boolean | undefined;
      if (running) {
        // The attach stream ends when the container's stdio closes; give it a moment to drain.
        await Promise.race([streamEnded, new Promise((r) => setTimeout(r, 2_000).unref())]);
        const state = await withTimeout(container.inspect(), ENGINE_CALL_TIMEOUT_MS, 'container inspect').then((i) => i.State, () => undefined);
        oomKilled = state?.OOMKilled;
      }
      clearTimeout(graceTimer);
      stream.destroy();
      // Bounded: an engine that hangs must not keep the exit (and the task) waiting forever.
      await withTimeout(container.remove({ force: true }), ENGINE_CALL_TIMEOUT_MS, 'container remove').catch((err: unknown) => {
        if ((err as EngineError).statusCode !== 404) log.warn({ taskId: spec.taskId, label: spec.label, reason: untrusted(engineMessage(err), 300) }, 'sandbox container removal failed');
      });
      live.delete(container.id);
      if (scratch !== undefined) await rm(scratch, { recursive: true, force: true }).catch(() => undefined);
      const signalOut = statusCode !== null && statusCode > 128 && statusCode - 128 < 65 ? signalName(statusCode - 128) : null;
      const reason: SandboxExitReason = killReason ?? (signalOut !== null ? 'signaled' : 'exited');
      const result: SandboxExit = {
        reason, exitCode: statusCode, signal: signalOut, durationMs: Math.round(performance.now() - startedAt),
        stdoutBytes: bytes.stdout, stderrBytes: bytes.stderr, stdoutTail: tails.stdout.toString(), stderrTail: tails.stderr.toString(),
      };
      log.info({ taskId: spec.taskId, label: spec.label, containerId: container.id.slice(0, 12), pid, reason, exitCode: statusCode, signal: signalOut,
        durationMs: result.durationMs, stdoutBytes: bytes.stdout, stderrBytes: bytes.stderr, oomKilled,
        stderrTail: untrusted(result.stderrTail, 300) }, 'sandbox exited');
      resolveExit(result);
    }

    const armIdle = (delayMs: number): void => {
      idleTimer = setTimeout(() => {
        const quietMs = performance.now() - lastActivity;
        if (quietMs >= limits.idleMs) void kill('idle_timeout');
        else armIdle(limits.idleMs - quietMs);
      }, delayMs);
    };

    return {
      get pid() {
        return pid;
      },
      exit,
      markActivity: () => {
        lastActivity = performance.now();
      },
      kill,
      abandon: () => finish(null),
      started() {
        running = true;
        if (killing) terminate();
        wallTimer = setTimeout(() => void kill('wall_timeout'), limits.wallMs);
        armIdle(limits.idleMs);
        spec.signal?.addEventListener('abort', onAbort, { once: true });
        if (spec.signal?.aborted) void kill('aborted');
        // Diagnostics only: the host pid of the container's init.
        void container.inspect().then((i) => {
          pid = i.State.Pid || undefined;
        }, () => undefined);
        container.wait().then(
          (r: { StatusCode?: number }) => finish(typeof r.StatusCode === 'number' ? r.StatusCode : null),
          () => finish(null),
        );
      },
    };
  }

  async function runtimes(): Promise<string[]> {
    const info = (await withTimeout(docker.info() as Promise<{ Runtimes?: Record<string, unknown> }>, CHECK_TIMEOUT_MS * 5, 'the Docker engine')) ?? {};
    return Object.keys(info.Runtimes ?? {});
  }

  return { name: backendName, image, check, launch, reapOrphans, runtimes };
}
