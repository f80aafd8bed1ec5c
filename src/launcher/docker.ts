/**
 * The Docker `Launcher` (runc): one hardened, throw-away container per attempt. The only module
 * that imports dockerode; nothing above it sees a dockerode error.
 *
 * What the child gets (see `containerConfig` in `docker-config.ts`): the child image (Node + the built sandbox/ code,
 * `Dockerfile.child`), no network at all (`NetworkMode: none`: only `lo`), a read-only root, no
 * capabilities, no_new_privs, the project's seccomp profile (`docker-seccomp.ts`, generated from
 * the bwrap filter's policy), an unprivileged uid (one leased per sandbox when the daemon is
 * root, else the daemon's own uid, like bwrap), docker-init as pid 1 (reaps zombies, forwards signals), private
 * pid/IPC/cgroup/UTS namespaces (IPC without /dev/shm), a pids cap, memory = memory+swap, a CPU
 * share, a size-capped noexec tmpfs /tmp (with /out the only writable places), and exactly
 * `spec.env` plus PATH (the engine's own HOSTNAME is unset; HOME is added unless given). Binds:
 * /repo ro, /out rw (under a root daemon a capped noexec tmpfs of its own on the host, copied to
 * the outDir after the exit: `out-mount.ts`), /opt/fusion ro (the host code dir, so one spec
 * works for both backends), the broker socket and a private read-only copy of the request.
 *
 * The broker socket is bound as a file, not its directory: /run/fusion/request.json lives
 * beside it, and a file bound into a host directory would make runc create its mount point
 * inside that directory on the host.
 *
 * Lifecycle: create → attach (before start, so no output is lost) → start → wait → inspect →
 * remove. Wall and idle timeouts, output and /out caps and `kill()` are the supervision core's
 * (`supervise.ts`); here a kill is SIGTERM to the container (docker-init forwards it), and SIGKILL
 * after `killGraceMs`. Containers carry labels (owner, task id, attempt) so a
 * restarted daemon can reap the ones nobody owns (`reapOrphans`).
 */
import { chmod, chown, copyFile, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { importOptionalPeer } from '../contracts/optional-peers.js';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import { untrusted } from '../log.js';
import { CHILD_CODE_LABEL, CHILD_IMAGE, CHILD_IMAGE_LABEL, containerConfig, LABELS } from './docker-config.js';
import { CHILD_ENTRY, childCodeDigest } from './child-code.js';
import { deadlineKeeper, KEEPER_SLACK_MS } from './docker-deadline-keeper.js';
import { demux, engineMessage, isTransient, withTimeout, type EngineError } from './docker-engine.js';
import { dockerSeccompSecurityOpt, hostSeccompArch } from './docker-seccomp.js';
import { LAUNCHER_WARNING_FIELD, type Launcher, type LauncherCheck, type SandboxHandle, type SandboxSpec } from './port.js';
import { ACCESS, permittedBits, resolveSandboxIdentity, type SandboxIdentity } from './sandbox-user.js';
import { leaseIdentity } from './sandbox-lease.js';
import { outDirCaps, supervise } from './supervise.js';
import { outDirOverflow } from './out-dir-usage.js';
import { copyOutTree, hostOutPath, mountHostOut, outMountOverflow, type HostOutMount } from './out-mount.js';
import { defaultUidPool, type UidPool } from './uid-pool.js';
import { validateSpec } from './validate-spec.js';

export const DEFAULT_DOCKER_SOCKET = '/var/run/docker.sock';
const CHECK_TIMEOUT_MS = 1_000;
const ENGINE_CALL_TIMEOUT_MS = 30_000;
const ENGINE_HINT = 'start dockerd (`systemctl start docker`, or `make system-deps-docker` as root) / apt-get install docker.io';

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
  /** The built tree whose child code the image should carry (default: this checkout's dist/). */
  childCodeDir?: string;
}

/** This checkout's built tree: the one this module is part of, or dist/ beside the sources (tests). */
function defaultChildCodeDir(): string | undefined {
  const here = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
  return [here, join(here, 'dist')].find((dir) => existsSync(join(dir, CHILD_ENTRY)));
}

/**
 * Whether the image carries this checkout's child code (its `org.fusion.child-code` label against
 * `childCodeDigest`). A mismatch is a loud warning, not a refusal: every launch binds the
 * checkout's own built child code read-only over the image's /opt/fusion (`containerConfig`), so
 * the image's copy never runs; what the mismatch says is that the image (its Node runtime and base)
 * was built by another checkout or from older code, which `make image` fixes. Refusing would take
 * the Docker tier away from every other checkout sharing the engine's `fusion-child:<version>` tag.
 */
export function childCodeWarning(image: string, label: string | undefined, codeDir: string | undefined): string | undefined {
  if (codeDir === undefined) return undefined;
  let own: string;
  try {
    own = childCodeDigest(codeDir);
  } catch {
    return undefined;
  }
  if (label === own) return undefined;
  const what = label === undefined ? 'carries no child-code label (built before labels existed)' : `was built from other child code (${label.slice(0, 19)}…)`;
  return `child image ${image} ${what}, not this checkout's (${own.slice(0, 19)}…): it may be stale or another checkout's; run make image`;
}

export interface DockerLauncher extends Launcher {
  readonly image: string;
  /** Removes this owner's labelled containers that no live task owns; returns their ids. */
  reapOrphans(liveTaskIds: Set<string>): Promise<string[]>;
  /** The OCI runtimes the engine has registered (`runc`, `runsc`…). */
  runtimes(): Promise<string[]>;
}

/**
 * The engine client, made on the first engine call: dockerode is loaded then, not with this module,
 * so a daemon whose sandboxes never reach Docker never loads it (docs/architecture.md#optional-peers).
 */
function lazyClient(socketPath: string, given?: Docker): () => Promise<Docker> {
  let client: Promise<Docker> | undefined = given === undefined ? undefined : Promise.resolve(given);
  return () => (client ??= importOptionalPeer(() => import('dockerode')).then(({ default: Dockerode }) => new Dockerode({ socketPath })));
}

/** Whether the engine still has a container of that name (for the uid pool's liveness check); errors count as yes. */
export function dockerContainerProbe(socketPath: string = DEFAULT_DOCKER_SOCKET): (name: string) => Promise<boolean> {
  const docker = lazyClient(socketPath);
  return async (name) => (await docker()).getContainer(name).inspect().then(() => true, (err: EngineError) => err.statusCode !== 404);
}

function launchError(message: string, details: Record<string, unknown>, cause?: unknown): FusionError {
  return new FusionError('launch_failed', message, { retryable: false, details, ...(cause === undefined ? {} : { cause }) });
}

/**
 * Hands /out and the broker socket to the sandbox uid (root daemon) and checks what the child
 * opens inside: bind mounts skip host ancestors, so only the bound inode's own mode matters.
 */
async function preparePaths(spec: SandboxSpec, identity: SandboxIdentity, outOnTmpfs: boolean): Promise<void> {
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
    // On its own tmpfs the container never sees the host outDir (the daemon copies into it).
    if (name === 'outDir' && outOnTmpfs) continue;
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
  const docker = lazyClient(socketPath, options.docker);
  const image = options.image ?? CHILD_IMAGE;
  const owner = options.owner ?? 'default';
  const nanoCpus = Math.round((options.cpus ?? 1) * 1e9);
  const pool = options.uidPool ?? defaultUidPool();
  const identity = resolveSandboxIdentity(pool.range, { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 });
  const backendName = options.name ?? 'docker';
  const arch = hostSeccompArch();
  const seccompOpt = arch === null ? null : (options.seccompOpt ?? ((opt: string) => opt))(dockerSeccompSecurityOpt(arch));
  const keeper = deadlineKeeper(socketPath);
  /** Container ids this launcher runs right now (never reaped). */
  const live = new Set<string>();
  const childCodeDir = options.childCodeDir ?? defaultChildCodeDir();
  /** The stale-image warning is logged once per launcher, however often check() runs. */
  let warned = false;

  async function check(): Promise<LauncherCheck> {
    if (seccompOpt === null) return { ok: false, reason: `no seccomp policy for architecture ${process.arch}` };
    if (options.docker === undefined && !(await stat(socketPath).then((s) => s.isSocket(), () => false))) {
      return { ok: false, reason: `Docker engine not reachable (no socket at ${socketPath}); ${ENGINE_HINT}` };
    }
    // A missing dockerode is the installation's fault, not the engine's: its own invalid_config.
    const engine = await docker();
    let version: { ApiVersion?: string };
    try {
      version = (await withTimeout(engine.version(), CHECK_TIMEOUT_MS, 'the Docker engine')) as { ApiVersion?: string };
    } catch (err) {
      // The engine may well be running: this user just may not open its socket. Starting or
      // installing Docker would not help, joining the socket's group would.
      if ((err as EngineError).code === 'EACCES') return { ok: false, reason: `no access to Docker: permission denied on ${socketPath} (this user is not in the docker group: \`usermod -aG docker USER\`, then log in again; or use the bwrap backend)` };
      return { ok: false, reason: `Docker engine not reachable at ${socketPath} (${untrusted(engineMessage(err), 200)}); ${ENGINE_HINT}` };
    }
    const [major = 0, minor = 0] = (version.ApiVersion ?? '0.0').split('.').map(Number);
    if (major < 1 || (major === 1 && minor < 41)) return { ok: false, reason: `Docker engine API ${version.ApiVersion ?? '?'} is too old (needs 1.41, Docker 20.10+)` };
    try {
      const info = await withTimeout(engine.getImage(image).inspect(), 5_000, 'image inspect');
      if (info.Config?.Labels?.[CHILD_IMAGE_LABEL] !== '1') return { ok: false, reason: `image ${image} is not a fusion child image (label ${CHILD_IMAGE_LABEL}=1 missing); run make image` };
      const warning = childCodeWarning(image, info.Config?.Labels?.[CHILD_CODE_LABEL], childCodeDir);
      if (warning !== undefined) {
        if (!warned) log.warn({ image, label: CHILD_CODE_LABEL, [LAUNCHER_WARNING_FIELD]: true }, warning);
        warned = true;
        return { ok: true, warning };
      }
    } catch (err) {
      if ((err as EngineError).statusCode === 404) return { ok: false, reason: `child image ${image} missing; run make image` };
      return { ok: false, reason: `cannot inspect image ${image}: ${untrusted(engineMessage(err), 200)}` };
    }
    return { ok: true };
  }

  async function reapOrphans(liveTaskIds: Set<string>): Promise<string[]> {
    const engine = await docker();
    let containers: Docker.ContainerInfo[];
    try {
      containers = await engine.listContainers({ all: true, filters: JSON.stringify({ label: [`${LABELS.sandbox}=1`, `${LABELS.owner}=${owner}`] }) });
    } catch (err) {
      throw new FusionError('sandbox_unavailable', `cannot list sandbox containers: ${untrusted(engineMessage(err), 300)}; ${ENGINE_HINT}`, { cause: err });
    }
    const reaped: string[] = [];
    for (const c of containers) {
      const taskId = c.Labels[LABELS.taskId] ?? '';
      if (live.has(c.Id) || liveTaskIds.has(taskId)) continue;
      try {
        await engine.getContainer(c.Id).remove({ force: true });
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
    let containerPid: number | undefined;
    let outMount: HostOutMount | undefined;
    try {
      if (seccompOpt === null) throw new FusionError('sandbox_unavailable', `no seccomp policy for architecture ${process.arch}`);
      who = await leaseIdentity(identity, pool, spec);
      const as = who.identity;
      await preparePaths(spec, as, as.dropPrivileges);
      if (as.dropPrivileges) {
        // /out on a capped noexec tmpfs of its own (out-mount.ts): the kernel stops a write at the
        // cap, and the bind keeps the tmpfs's noexec (the engine's binds take no mount flags).
        outMount = await mountHostOut(hostOutPath(), outDirCaps(spec.limits), as.uid, as.gid).catch((err: unknown) => {
          throw new FusionError('launch_failed', `cannot mount the sandbox /out: ${(err as Error).message}`, { retryable: true, cause: err, details: base });
        });
      }
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
      const config = containerConfig({ spec, image, identity: as, nanoCpus, owner, seccompOpt, ...(outMount === undefined ? {} : { outSource: outMount.dir }), ...(requestCopy === undefined ? {} : { requestCopy }), ...(options.runtime === undefined ? {} : { runtime: options.runtime }), ...(options.pidsHeadroom === undefined ? {} : { pidsHeadroom: options.pidsHeadroom }) });
      if (config.name !== undefined) who.noteContainer(config.name);
      try {
        container = await (await docker()).createContainer(config);
      } catch (err) {
        const status = (err as EngineError).statusCode;
        if (status === 404) throw new FusionError('sandbox_unavailable', `child image ${image} missing; run make image`, { cause: err, details: base });
        const transient = isTransient(err);
        const hint = (err as EngineError).code === 'ECONNREFUSED' || (err as EngineError).code === 'ENOENT' ? `; ${ENGINE_HINT}` : '';
        throw new FusionError('launch_failed', `cannot create the sandbox container: ${untrusted(engineMessage(err), 500)}${hint}`, { retryable: transient, cause: err, details: base });
      }
      live.add(container.id);
      const stream = (await container.attach({ stream: true, stdout: true, stderr: true })) as unknown as Readable;
      const supervision = superviseContainer(container, stream, spec, startedAt, scratch, () => containerPid, outMount);
      const handle = supervision.handle;
      // From here on the supervision's exit path removes the container and the scratch copy,
      // and then gives the uid back.
      supervised = true;
      const leased = who;
      void handle.exit.finally(() => leased.release());
      try {
        await container.start();
      } catch (err) {
        supervision.notStarted();
        supervision.exited({ code: null, signal: null });
        await handle.exit;
        throw launchError(`cannot start the sandbox container: ${untrusted(engineMessage(err), 500)}`, base, err);
      }
      supervision.started();
      // The wall clock without the daemon: removed by the keeper if this process dies first.
      keeper.watch(container.id, Date.now() + spec.limits.wallMs + spec.limits.killGraceMs + KEEPER_SLACK_MS);
      // Diagnostics only: the host pid of the container's init.
      void container.inspect().then((i) => {
        containerPid = i.State.Pid || undefined;
      }, () => undefined);
      container.wait().then(
        (r: { StatusCode?: number }) => supervision.exited({ code: typeof r.StatusCode === 'number' ? r.StatusCode : null, signal: null }),
        () => supervision.exited({ code: null, signal: null }),
      );
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
        await outMount?.release();
        who?.release();
      }
      const error = err instanceof FusionError ? err : new FusionError('launch_failed', engineMessage(err), { retryable: container === undefined && isTransient(err), cause: err, details: base });
      log.warn({ ...base, code: error.code, retryable: error.retryable, reason: untrusted(error.message, 500) }, 'sandbox launch failed');
      throw error;
    }
  }

  /** The Docker side of supervision: signals through the engine, and inspect + remove after the exit. */
  function superviseContainer(container: Docker.Container, stream: Readable, spec: SandboxSpec, startedAt: number, scratch: string | undefined, pid: () => number | undefined, outMount: HostOutMount | undefined) {
    let running = false;
    const signal = (name: 'SIGTERM' | 'SIGKILL'): Promise<void> => container.kill({ signal: name }).then(() => undefined, () => undefined);
    const streamEnded = new Promise<void>((resolve) => {
      stream.once('end', resolve);
      stream.once('close', resolve);
      stream.once('error', () => resolve());
    });
    const caps = outDirCaps(spec.limits);
    // The tmpfs's own count first (it sees unlinked files), then the tree (apparent sizes).
    const checkOutDir = outMount === undefined ? undefined
      : async (): Promise<string | null> => (await outMountOverflow(outMount.dir, caps)) ?? outDirOverflow(outMount.dir, caps);
    const supervision = supervise({
      spec, log, startedAt, ...(checkOutDir === undefined ? {} : { checkOutDir }),
      backend: {
        pid,
        terminate: () => signal('SIGTERM'),
        hardKill: () => signal('SIGKILL'),
        inspect: async () => {
          let oomKilled: boolean | undefined;
          if (running) {
            // The attach stream ends when the container's stdio closes; give it a moment to drain.
            await Promise.race([streamEnded, new Promise((r) => setTimeout(r, 2_000).unref())]);
            const state = await withTimeout(container.inspect(), ENGINE_CALL_TIMEOUT_MS, 'container inspect').then((i) => i.State, () => undefined);
            oomKilled = state?.OOMKilled;
          }
          stream.destroy();
          // Bounded: an engine that hangs must not keep the exit (and the task) waiting forever.
          await withTimeout(container.remove({ force: true }), ENGINE_CALL_TIMEOUT_MS, 'container remove').catch((err: unknown) => {
            if ((err as EngineError).statusCode !== 404) log.warn({ taskId: spec.taskId, label: spec.label, reason: untrusted(engineMessage(err), 300) }, 'sandbox container removal failed');
          });
          live.delete(container.id);
          keeper.release(container.id);
          if (scratch !== undefined) await rm(scratch, { recursive: true, force: true }).catch(() => undefined);
          let collected: Record<string, unknown> = {};
          if (outMount !== undefined) {
            // The container is gone: copy its /out to the host outDir, then let the tmpfs go.
            collected = await copyOutTree(outMount.dir, spec.outDir, caps).then(({ copied, skipped }) => ({ outFiles: copied, ...(skipped > 0 ? { outSkipped: skipped } : {}) }), (err: Error) => {
              log.warn({ taskId: spec.taskId, label: spec.label, reason: err.message }, 'sandbox /out could not be copied to the host');
              return {};
            });
            await outMount.release();
          }
          return { containerId: container.id.slice(0, 12), oomKilled, ...collected };
        },
      },
    });
    demux(stream, (kind, chunk) => supervision.output(kind, chunk));
    return {
      ...supervision,
      started: (): void => {
        running = true;
        supervision.started();
      },
    };
  }

  async function runtimes(): Promise<string[]> {
    const info = (await withTimeout((await docker()).info() as Promise<{ Runtimes?: Record<string, unknown> }>, CHECK_TIMEOUT_MS * 5, 'the Docker engine')) ?? {};
    return Object.keys(info.Runtimes ?? {});
  }

  return { name: backendName, image, check, launch, reapOrphans, runtimes };
}
