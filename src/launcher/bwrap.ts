/**
 * The bubblewrap `Launcher`: one unprivileged, namespaced, seccomp-filtered sandbox per attempt.
 *
 * What the child gets (everything else of the host is absent, not hidden):
 * - namespaces: all of them (`--unshare-all --unshare-user`), no further user namespaces
 *   (`--disable-userns`), a new session (no TIOCSTI into the daemon's terminal), no capabilities,
 *   an empty environment plus `spec.env` (and a default PATH), a network namespace with only `lo`;
 * - seccomp: the filter from `seccomp-bpf.ts`, passed on a pipe (`--seccomp 3`);
 * - files: `/usr` and the /bin,/lib* links or dirs read-only (the node runtime and its shared
 *   libraries; the node install is bound too when it lives outside /usr), `/etc/ld.so.cache`,
 *   `/repo` ro, `/out` rw, `/opt/fusion` ro, the broker socket, the request as a read-only copy
 *   (`--ro-bind-data`, so its host permissions do not matter), fresh `/proc`, minimal read-only `/dev`,
 *   a size-capped tmpfs `/tmp`, and a read-only root. No /etc, /home, /root, /work, host /tmp.
 *   Under a root daemon `/tmp` and `/out` are `noexec` tmpfs mounts of the private namespace
 *   (`private-binds.ts`); `/out` is capped by the kernel and copied to the host outDir after the
 *   exit through a descriptor taken during the handshake (`out-mount.ts`).
 *   The working directory is /repo.
 * - limits: see `process-limits.ts` (cgroup v2 → cgroup v1; rlimits only by the admin's opt-in);
 *   wall, idle, output and /out caps are the supervision core's (`supervise.ts`).
 *
 * Files: the options are built in `bwrap-args.ts` (pure), the runtime binds in
 * `bwrap-runtime-binds.ts`, the start-up handshake over fds in `bwrap-handshake.ts`; this module
 * runs bwrap and tells the supervision core how to signal it.
 *
 * Killing: SIGTERM once to every process of the sandbox (the cgroup's, else the process tree
 * under the sandbox init, re-scanned during the grace period), then after `killGraceMs` SIGKILL
 * to bwrap, the init and all of them. A kill never interrupts the handshake (the core waits for
 * `started`/`notStarted`). bwrap runs with `--die-with-parent` and the sandbox init gets the same
 * parent-death signal from bwrap, so the whole sandbox dies with the daemon, even a SIGKILLed
 * one: no child outlives it (test/e2e/containment/daemon-death.test.ts).
 *
 * Exit status: bwrap reports a child killed by signal N as exit code 128+N; such codes are
 * reported as reason `signaled` with the signal name, keeping the raw exit code.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { access, open, readFile, statfs, type FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import { untrusted } from '../log.js';
import { buildBwrapArgs, bwrapArgv, type Runtime } from './bwrap-args.js';
import { handshake, type HandshakeProgress } from './bwrap-handshake.js';
import { resolveRuntime } from './bwrap-runtime-binds.js';
import type { Launcher, LauncherCheck, SandboxHandle, SandboxSpec } from './port.js';
import { descendantPids } from './proc-files.js';
import { detectLimitBackend, type LimitBackend, type LimitMechanism, type LimitPreference, type SandboxCgroup } from './process-limits.js';
import { Tail } from './process-output.js';
import { executableProblem, prepareHostPaths, resolveSandboxIdentity, type SandboxIdentity } from './sandbox-user.js';
import { leaseIdentity } from './sandbox-lease.js';
import { ensureMountBase, privateBinds, SETPRIV_PATH, type PrivateBinds } from './private-binds.js';
import { outDirOverflow } from './out-dir-usage.js';
import { copyOutTree, outMountOverflow } from './out-mount.js';
import { defaultUidPool, type UidPool } from './uid-pool.js';
import { outDirCaps, supervise } from './supervise.js';
import { validateSpec } from './validate-spec.js';

/** A root daemon's sandbox /out: its mount point inside the private namespace, and the held root. */
interface PrivateOut {
  mountPoint: string | undefined;
  handle: FileHandle | undefined;
}

export interface BwrapLauncherOptions {
  log: Logger;
  /** Where a root daemon leases each sandbox's uid (default: the process-wide pool). */
  uidPool?: UidPool;
  bwrapPath?: string;
  /** The node binary whose install is made available inside (default: this process's). */
  nodePath?: string;
  /** Memory/process cap mechanism (default `auto`: cgroup v2, then cgroup v1). */
  limits?: LimitPreference;
  /** With `auto`: accept the weak rlimit mode when no cgroup is usable (the admin's opt-in). */
  allowRlimitFallback?: boolean;
  /** A delegated cgroup2 directory for sandbox cgroups (systemd `Delegate=yes`). */
  cgroupParent?: string;
  prlimitPath?: string;
}

export interface BwrapLauncher extends Launcher {
  /** The cap mechanism in use (detected on first use, then fixed). */
  limitMechanism(): Promise<LimitMechanism>;
}

const INSTALL_HINT = 'install it with `apt-get install bubblewrap`';
const TAIL_BYTES = 4096;
const CHECK_TIMEOUT_MS = 15_000;
/** During the kill grace period, how often new sandbox processes are looked for (to SIGTERM them). */
const TERM_POLL_MS = 100;
/** statfs type of tmpfs: what the held /out descriptor must name. */
const TMPFS_MAGIC = 0x01021994;
const RETRYABLE_ERRNOS = new Set(['EAGAIN', 'EBUSY', 'ENOMEM', 'ENOSPC', 'EMFILE', 'ENFILE']);

function isRetryable(err: unknown): boolean {
  return RETRYABLE_ERRNOS.has((err as NodeJS.ErrnoException | null)?.code ?? '');
}

function sanitizeName(text: string): string {
  return text.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 40);
}

function signalAll(pids: Array<number | undefined>, signal: NodeJS.Signals): void {
  for (const pid of pids) {
    if (pid === undefined) continue;
    try {
      process.kill(pid, signal);
    } catch {
      // gone already
    }
  }
}

export function createBwrapLauncher(options: BwrapLauncherOptions): BwrapLauncher {
  const log = options.log.child({ component: 'launcher', launcher: 'bwrap' });
  const bwrapPath = options.bwrapPath ?? '/usr/bin/bwrap';
  const nodePath = options.nodePath ?? process.execPath;
  const pool = options.uidPool ?? defaultUidPool();
  const identity: SandboxIdentity = resolveSandboxIdentity(pool.range, {
    uid: process.getuid?.() ?? 0,
    gid: process.getgid?.() ?? 0,
  });
  let runtimePromise: Promise<Runtime> | undefined;
  let backendPromise: Promise<LimitBackend> | undefined;
  const runtime = (): Promise<Runtime> => (runtimePromise ??= resolveRuntime(nodePath));
  const backend = (): Promise<LimitBackend> =>
    (backendPromise ??= detectLimitBackend({
      preference: options.limits ?? 'auto',
      ...(options.allowRlimitFallback === undefined ? {} : { allowRlimitFallback: options.allowRlimitFallback }),
      ...(options.cgroupParent === undefined ? {} : { cgroupParent: options.cgroupParent }),
      ...(options.prlimitPath === undefined ? {} : { prlimitPath: options.prlimitPath }),
    }).then((found) => {
      log.info({ limitMechanism: found.mechanism, detail: found.detail }, 'sandbox cap mechanism selected');
      return found;
    }, (err: unknown) => {
      backendPromise = undefined; // let a later check() or launch() try again
      throw err;
    }));

  /** `as`: who bwrap runs as; a root daemon's launches drop to it through `private-binds.ts` (argv prefix), checks directly. */
  function spawnBwrap(argv: string[], extraFd?: number, as?: SandboxIdentity): ChildProcess {
    const [file, ...rest] = argv as [string, ...string[]];
    const stdio: Array<'ignore' | 'pipe' | number> = ['ignore', 'pipe', 'pipe', 'pipe', 'pipe', 'pipe', 'pipe'];
    if (extraFd !== undefined) stdio.push(extraFd);
    return spawn(file, rest, {
      stdio,
      // bwrap itself gets no environment either; the child's comes from --setenv.
      env: {},
      cwd: '/',
      // Own process group: terminal signals to the daemon do not reach the sandbox directly.
      detached: true,
      ...(as?.dropPrivileges ? { uid: as.uid, gid: as.gid } : {}),
    });
  }

  async function check(): Promise<LauncherCheck> {
    // Installing bwrap is the fix only when it is missing; otherwise the reason names the fix.
    const notOk = (why: string): LauncherCheck => ({ ok: false, reason: `bubblewrap is installed but not usable: ${why}` });
    try {
      await access(bwrapPath, fsConstants.X_OK);
    } catch {
      return { ok: false, reason: `bubblewrap is not usable: ${bwrapPath} is missing or not executable; ${INSTALL_HINT}` };
    }
    const maxUserNs = (await readFile('/proc/sys/user/max_user_namespaces', 'utf8').catch(() => '1')).trim();
    if (maxUserNs === '0') return notOk('user namespaces are disabled (sysctl user.max_user_namespaces=0)');
    const unprivClone = (await readFile('/proc/sys/kernel/unprivileged_userns_clone', 'utf8').catch(() => '1')).trim();
    if (unprivClone === '0') return notOk('unprivileged user namespaces are disabled (sysctl kernel.unprivileged_userns_clone=0)');
    const nodeProblem = await executableProblem(nodePath, identity.uid, identity.gid).catch((err: Error) => err.message);
    if (nodeProblem !== null) return notOk(`the node runtime is not usable by uid ${identity.uid}: ${nodeProblem}`);
    try {
      await backend();
      if (identity.dropPrivileges) ensureMountBase();
    } catch (err) {
      return notOk((err as Error).message);
    }
    // A real (tiny) sandbox with the production flags and filter: proves userns, seccomp, binds.
    const invocation = buildBwrapArgs({ runtime: await runtime(), tmpfsBytes: 1024 * 1024, hasRequest: false, env: {}, command: [nodePath, '-e', '0'] });
    const trialLease = await leaseIdentity(identity, pool, { taskId: 'check', label: 'trial', outDir: '/nonexistent' });
    const child = spawnBwrap(bwrapArgv(bwrapPath, invocation), undefined, trialLease.identity);
    const stderr = new Tail(TAIL_BYTES);
    child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
    const exited = new Promise<{ code: number | null; error?: Error }>((resolve) => {
      child.once('error', (error) => resolve({ code: null, error }));
      child.once('close', (code) => resolve({ code }));
    });
    const trial: HandshakeProgress = { initPid: undefined, released: false };
    const killTrial = (): void => signalAll([child.pid, trial.initPid].filter((pid): pid is number => pid !== undefined), 'SIGKILL');
    const timer = setTimeout(killTrial, CHECK_TIMEOUT_MS);
    if ((await handshake(child, invocation, undefined, trial).catch(() => null)) === null) killTrial();
    const result = await exited;
    trialLease.release();
    clearTimeout(timer);
    if (result.code === 0) return { ok: true };
    const why = result.error?.message ?? (stderr.toString().trim() || `exit code ${String(result.code)}`);
    return notOk(`a trial sandbox failed: ${untrusted(why, 500)}`);
  }

  async function launch(spec: SandboxSpec): Promise<SandboxHandle> {
    const startedAt = performance.now();
    const base = { taskId: spec.taskId, label: spec.label };
    if (spec.signal?.aborted) throw new FusionError('cancelled', 'the launch was aborted before the sandbox started', { details: base });
    validateSpec(spec);
    const { limits } = spec;
    let cgroup: SandboxCgroup | undefined;
    let requestHandle: FileHandle | undefined;
    let mechanism: LimitMechanism | undefined;
    let who: Awaited<ReturnType<typeof leaseIdentity>> | undefined;
    let binds: PrivateBinds | undefined;
    try {
      await access(bwrapPath, fsConstants.X_OK).catch(() => {
        throw new FusionError('sandbox_unavailable', `bubblewrap is not usable: ${bwrapPath} is missing; ${INSTALL_HINT}`);
      });
      const [rt, limitBackend] = await Promise.all([runtime(), backend()]);
      mechanism = limitBackend.mechanism;
      who = await leaseIdentity(identity, pool, spec);
      const as = who.identity;
      // A root daemon gives the sandbox a capped tmpfs as /out (private-binds.ts): the host outDir
      // is only written by the copy after the exit, so it stays root's.
      await prepareHostPaths(spec, as, { outOnTmpfs: as.dropPrivileges });
      if (as.dropPrivileges) {
        binds = privateBinds({
          ...(spec.repoDir === undefined ? {} : { repoDir: spec.repoDir }),
          ...(spec.codeDir === undefined ? {} : { codeDir: spec.codeDir }),
          tmpfsBytes: limits.tmpfsBytes, out: outDirCaps(limits),
        }, as);
      }
      if (spec.requestFile !== undefined) {
        requestHandle = await open(spec.requestFile, 'r').catch((err: NodeJS.ErrnoException) => {
          throw new FusionError('launch_failed', `requestFile ${spec.requestFile} cannot be opened: ${err.code ?? err.message}`, { retryable: false });
        });
      }
      const caps = { memoryBytes: limits.memoryBytes, maxProcesses: limits.maxProcesses };
      let prefix: string[] = [];
      if (limitBackend.mechanism === 'rlimit') prefix = await limitBackend.commandPrefix(caps, as.uid);
      else {
        const name = `${sanitizeName(spec.taskId)}.${sanitizeName(spec.label)}.${randomUUID().slice(0, 8)}`;
        cgroup = await limitBackend.create(name, caps).catch((err: unknown) => {
          throw new FusionError('launch_failed', `cannot create the sandbox cgroup: ${(err as Error).message}`, { retryable: isRetryable(err), cause: err });
        });
      }
      const invocation = buildBwrapArgs({
        runtime: rt, tmpfsBytes: limits.tmpfsBytes, repoDir: binds?.repoDir ?? spec.repoDir, outDir: binds?.outDir ?? spec.outDir,
        ...(binds === undefined ? {} : { tmpDir: binds.tmpDir }),
        ...(spec.codeDir === undefined ? {} : { codeDir: binds?.codeDir ?? spec.codeDir }),
        ...(spec.brokerSocketPath === undefined ? {} : { brokerSocketPath: spec.brokerSocketPath }),
        hasRequest: requestHandle !== undefined, env: spec.env ?? {}, command: spec.command,
      });
      // The parent-death signal from the first exec on (a non-root daemon spawns bwrap through
      // setpriv for it too): a daemon killed before bwrap's own --die-with-parent takes hold
      // still takes the launch with it.
      const head = binds?.prefix ?? [SETPRIV_PATH, '--pdeathsig', 'KILL', '--'];
      const child = spawnBwrap([...head, ...prefix, ...bwrapArgv(bwrapPath, invocation)], requestHandle?.fd);
      const ownCgroup = cgroup;
      cgroup = undefined; // from here on the supervision's inspect removes it
      const progress: HandshakeProgress = { initPid: undefined, released: false };
      const out: PrivateOut = { mountPoint: binds?.outDir, handle: undefined };
      const supervision = superviseBwrap(child, spec, startedAt, ownCgroup, progress, mechanism, out);
      const handle = supervision.handle;
      // The uid outlives the launch call: the exit path gives it back.
      const leased = who;
      who = undefined;
      binds = undefined;
      void handle.exit.finally(() => leased.release());
      const spawnError = await new Promise<Error | null>((resolve) => {
        child.once('spawn', () => resolve(null));
        child.once('error', (err) => resolve(err));
      });
      await requestHandle?.close();
      requestHandle = undefined;
      if (spawnError !== null) {
        supervision.notStarted();
        supervision.exited({ code: null, signal: null }); // no 'close' follows when the process never existed
        await handle.exit.catch(() => undefined);
        const code = spawnError as NodeJS.ErrnoException;
        if (code.code === 'ENOENT') throw new FusionError('sandbox_unavailable', `bubblewrap is not usable: ${spawnError.message}; ${INSTALL_HINT}`, { cause: spawnError });
        throw new FusionError('launch_failed', `cannot start bwrap: ${spawnError.message}`, { retryable: isRetryable(spawnError), cause: spawnError });
      }
      let initPid: number | null;
      try {
        initPid = await handshake(child, invocation, ownCgroup, progress, () => holdPrivateOut(child, out, as));
      } catch (err) {
        supervision.notStarted();
        await handle.kill('aborted');
        throw new FusionError('launch_failed', `cannot place the sandbox in its cgroup: ${(err as Error).message}`, { retryable: isRetryable(err), cause: err });
      }
      if (initPid === null) {
        supervision.notStarted();
        const exit = await handle.kill('aborted').then(() => handle.exit);
        if (spec.signal?.aborted) throw new FusionError('cancelled', 'the launch was aborted before the sandbox started', { details: base });
        // bwrap died before the sandbox existed; namespace exhaustion is transient, option errors are not.
        const transient = /Creating new namespace failed|Resource temporarily unavailable|No space left/i.test(exit.stderrTail);
        throw new FusionError('launch_failed', `bwrap failed before the sandbox started: ${untrusted(exit.stderrTail.trim(), 500)}`, {
          retryable: transient, details: base,
        });
      }
      supervision.started();
      log.info({ ...base, pid: child.pid, initPid, uid: as.uid, gid: as.gid, limitMechanism: mechanism,
        memoryBytes: limits.memoryBytes, maxProcesses: limits.maxProcesses, wallMs: limits.wallMs, idleMs: limits.idleMs,
        launchMs: Math.round(performance.now() - startedAt) }, 'sandbox launched');
      return handle;
    } catch (err) {
      await requestHandle?.close().catch(() => undefined);
      await cgroup?.destroy().catch(() => undefined);
      who?.release();
      const error = err instanceof FusionError ? err : new FusionError('launch_failed', (err as Error).message, { retryable: isRetryable(err), cause: err });
      log.warn({ ...base, code: error.code, retryable: error.retryable, limitMechanism: mechanism, reason: untrusted(error.message, 500) }, 'sandbox launch failed');
      throw error;
    }
  }

  /** The bwrap side of supervision: how to find, signal and clean up one sandbox's processes. */
  function superviseBwrap(child: ChildProcess, spec: SandboxSpec, startedAt: number, cgroup: SandboxCgroup | undefined, progress: HandshakeProgress, mechanism: LimitMechanism, out: PrivateOut) {
    const sandboxPids = async (): Promise<number[]> => {
      if (cgroup !== undefined) return cgroup.pids();
      return progress.initPid === undefined ? [] : descendantPids(progress.initPid);
    };
    // SIGTERM once to every sandbox process, including any that appear during the grace period
    // (a kill right after the release can precede the command's own fork).
    const termed = new Set<number>();
    const caps = outDirCaps(spec.limits);
    // /out on its private tmpfs: the kernel's own count first (it sees unlinked files), then the
    // tree (apparent sizes: a sparse file must not grow on the host when copied). Without one
    // (a non-root daemon) only the tree can be measured.
    const checkOutDir = async (): Promise<string | null> => {
      if (out.handle === undefined) return out.mountPoint === undefined ? outDirOverflow(spec.outDir, caps) : null;
      const root = `/proc/self/fd/${out.handle.fd}`;
      return (await outMountOverflow(root, caps)) ?? outDirOverflow(root, caps);
    };
    const supervision = supervise({
      spec, log, startedAt, checkOutDir,
      backend: {
        pid: () => child.pid,
        termRepeatMs: TERM_POLL_MS,
        terminate: async () => {
          const fresh = (await sandboxPids()).filter((pid) => !termed.has(pid));
          fresh.forEach((pid) => termed.add(pid));
          signalAll(fresh, 'SIGTERM');
        },
        hardKill: async () => {
          // bwrap and the init are named explicitly: the init is the one process that must die for
          // the namespace to go, and before the release it is in no cgroup yet.
          const pids = await sandboxPids().catch(() => []);
          signalAll([child.pid, progress.initPid, ...pids], 'SIGKILL');
        },
        inspect: async () => {
          const stats = await cgroup?.stats().catch(() => undefined);
          await cgroup?.destroy().catch((err: Error) => log.warn({ taskId: spec.taskId, label: spec.label, reason: err.message }, 'sandbox cgroup cleanup failed'));
          const collected = await collectPrivateOut(out, spec).catch((err: Error) => {
            log.warn({ taskId: spec.taskId, label: spec.label, reason: err.message }, 'sandbox /out could not be copied to the host');
            return undefined;
          });
          return { limitMechanism: mechanism, oomKills: stats?.oomKills, pidsLimitHits: stats?.pidsLimitHits, memoryPeakBytes: stats?.memoryPeakBytes, ...collected };
        },
      },
    });
    child.stdout?.on('data', (chunk: Buffer) => supervision.output('stdout', chunk));
    child.stderr?.on('data', (chunk: Buffer) => supervision.output('stderr', chunk));
    child.once('close', (code, signal) => supervision.exited({ code, signal }));
    child.once('exit', () => {
      // Every sandbox process is gone with bwrap (--die-with-parent); if a pipe still has not
      // closed after a moment, stop waiting for it.
      setTimeout(() => {
        for (const stream of child.stdio) (stream as Readable | null)?.destroy();
      }, 2_000).unref();
    });
    return supervision;
  }

  /**
   * Opens the root of the sandbox's private /out tmpfs through bwrap's own view of its mount
   * namespace (bwrap has just reported the init and waits for the release: nothing of the child
   * ran yet). The descriptor keeps the tmpfs alive after the namespace is gone, until the copy.
   */
  async function holdPrivateOut(child: ChildProcess, out: PrivateOut, as: SandboxIdentity): Promise<void> {
    if (out.mountPoint === undefined || child.pid === undefined) return;
    const handle = await open(`/proc/${child.pid}/root${out.mountPoint}`, fsConstants.O_RDONLY | fsConstants.O_DIRECTORY | fsConstants.O_NOFOLLOW);
    const [info, fs] = await Promise.all([handle.stat(), statfs(`/proc/self/fd/${handle.fd}`)]).catch(async (err: unknown) => {
      await handle.close();
      throw err;
    });
    if (fs.type !== TMPFS_MAGIC || info.uid !== as.uid) {
      await handle.close();
      throw new Error(`the sandbox /out is not its private tmpfs (type ${fs.type.toString(16)}, owner ${info.uid})`);
    }
    out.handle = handle;
  }

  /** After the exit: copies the private /out into the host outDir and lets the tmpfs go. */
  async function collectPrivateOut(out: PrivateOut, spec: SandboxSpec): Promise<Record<string, unknown>> {
    const handle = out.handle;
    if (handle === undefined) return {};
    out.handle = undefined;
    try {
      const { copied, skipped } = await copyOutTree(`/proc/self/fd/${handle.fd}`, spec.outDir, outDirCaps(spec.limits));
      return { outFiles: copied, ...(skipped > 0 ? { outSkipped: skipped } : {}) };
    } finally {
      await handle.close();
    }
  }

  return {
    name: 'bwrap',
    check,
    launch,
    limitMechanism: async () => (await backend()).mechanism,
  };
}
