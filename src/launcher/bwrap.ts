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
 *   The working directory is /repo.
 * - limits: see `process-limits.ts` (cgroup v2 → cgroup v1 → rlimits); wall, idle and output caps
 *   are enforced here.
 *
 * Start-up handshake (fds, see FD): bwrap reads its options and the seccomp program from pipes,
 * reports the sandbox init's host pid on `--info-fd`, and holds that init on `--block-fd` until
 * it has been put in its cgroup, so no sandbox process ever runs outside the caps.
 *
 * Killing: SIGTERM once to every process of the sandbox (the cgroup's, else the process tree
 * under the sandbox init, re-scanned during the grace period), then after `killGraceMs` SIGKILL
 * to bwrap, the init and all of them. A kill never interrupts the handshake (see `kill`). bwrap
 * runs with `--die-with-parent`, so the sandbox also dies with the daemon.
 *
 * Exit status: bwrap reports a child killed by signal N as exit code 128+N; such codes are
 * reported as reason `signaled` with the signal name, keeping the raw exit code.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { access, lstat, open, readFile, readlink, realpath, type FileHandle } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Duplex, Readable } from 'node:stream';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import { untrusted } from '../log.js';
import { SANDBOX_PATHS, type Launcher, type LauncherCheck, type SandboxExit, type SandboxExitReason, type SandboxHandle, type SandboxLimits, type SandboxSpec } from './port.js';
import { validateSpec } from './validate-spec.js';
import { Tail, signalName } from './process-output.js';
import { descendantPids, detectLimitBackend, type LimitBackend, type LimitMechanism, type LimitPreference, type SandboxCgroup } from './process-limits.js';
import { seccompProgram } from './seccomp-bpf.js';
import { executableProblem, prepareHostPaths, resolveSandboxIdentity, type SandboxIdentity } from './sandbox-user.js';
import { leaseIdentity } from './sandbox-lease.js';
import { privateBinds, type PrivateBinds } from './private-binds.js';
import { defaultUidPool, type UidPool } from './uid-pool.js';

export interface BwrapLauncherOptions {
  log: Logger;
  /** Where a root daemon leases each sandbox's uid (default: the process-wide pool). */
  uidPool?: UidPool;
  bwrapPath?: string;
  /** The node binary whose install is made available inside (default: this process's). */
  nodePath?: string;
  /** Memory/process cap mechanism (default `auto`: cgroup v2, cgroup v1, then rlimits). */
  limits?: LimitPreference;
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
const HANDSHAKE_TIMEOUT_MS = 30_000;
const CHECK_TIMEOUT_MS = 15_000;
/** During the kill grace period, how often new sandbox processes are looked for (to SIGTERM them). */
const TERM_POLL_MS = 100;
/**
 * Child-side fds: 3 seccomp program, 4 info (bwrap → us), 5 block (us → bwrap), 6 bwrap's options
 * (`--args`: keeps host paths and env values out of the sandbox init's /proc/1/cmdline), 7 request.
 */
const FD = { seccomp: 3, info: 4, block: 5, args: 6, request: 7 } as const;
const RETRYABLE_ERRNOS = new Set(['EAGAIN', 'EBUSY', 'ENOMEM', 'ENOSPC', 'EMFILE', 'ENFILE']);

const NAMESPACE_FLAGS = [
  '--unshare-all', '--unshare-user', '--disable-userns', '--die-with-parent', '--new-session',
  '--cap-drop', 'ALL', '--hostname', 'sandbox',
];

interface Runtime {
  /** Read-only binds of the runtime (node and its libraries). */
  mountArgs: string[];
  defaultPath: string;
}

/** Binds /usr and mirrors /bin, /lib… (symlinks on usrmerge systems, directories elsewhere). */
async function resolveRuntime(nodePath: string): Promise<Runtime> {
  const args = ['--ro-bind', '/usr', '/usr'];
  const bound = ['/usr'];
  for (const name of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
    const path = `/${name}`;
    try {
      const info = await lstat(path);
      if (info.isSymbolicLink()) args.push('--symlink', await readlink(path), path);
      else if (info.isDirectory()) {
        args.push('--ro-bind', path, path);
        bound.push(path);
      }
    } catch {
      // absent on this host
    }
  }
  const realNode = await realpath(nodePath);
  if (!bound.some((dir) => realNode.startsWith(`${dir}/`))) {
    // e.g. /opt/node-v20/bin/node: bind the whole install (lib/ next to bin/) read-only. Only a
    // recognisable install prefix is bound: for ~/bin/node the "prefix" would be a home directory.
    const prefix = dirname(dirname(realNode));
    const homeLike = prefix === '/' || /^\/(root|home\/[^/]+)(\/\.local)?$/.test(prefix) || homedir() === prefix;
    if (homeLike || dirname(realNode) !== join(prefix, 'bin')) {
      throw new FusionError('sandbox_unavailable', `the Node runtime ${realNode} is not in an install prefix that can be bound into a sandbox (it would expose ${prefix}); use a Node installed under /usr, /usr/local or /opt`);
    }
    args.push('--ro-bind', prefix, prefix);
  }
  args.push('--ro-bind-try', '/etc/ld.so.cache', '/etc/ld.so.cache');
  const pathDirs = [dirname(nodePath), dirname(realNode), '/usr/local/bin', '/usr/bin', '/bin'];
  return { mountArgs: args, defaultPath: [...new Set(pathDirs)].join(':') };
}

export interface BwrapArgsInput {
  runtime: Runtime;
  tmpfsBytes: number;
  repoDir?: string;
  outDir?: string;
  codeDir?: string;
  brokerSocketPath?: string;
  hasRequest: boolean;
  env: Record<string, string>;
  command: string[];
}

export interface BwrapInvocation {
  /** Options, fed NUL-separated on the `--args` fd. */
  options: string[];
  /** What follows `--` on bwrap's command line (the only part the child sees in /proc/1/cmdline). */
  command: string[];
}

/** The bwrap options and command. Pure, for tests. */
export function buildBwrapArgs(input: BwrapArgsInput): BwrapInvocation {
  const args = [...NAMESPACE_FLAGS, '--seccomp', String(FD.seccomp), '--info-fd', String(FD.info), '--block-fd', String(FD.block)];
  args.push(...input.runtime.mountArgs);
  // /dev is a tmpfs the sandbox user owns: read-only, or it would be scratch space beyond the
  // /tmp cap (device nodes stay usable on a read-only mount).
  args.push('--proc', '/proc', '--dev', '/dev', '--remount-ro', '/dev');
  args.push('--size', String(input.tmpfsBytes), '--perms', '1777', '--tmpfs', SANDBOX_PATHS.tmp);
  if (input.repoDir !== undefined) args.push('--ro-bind', input.repoDir, SANDBOX_PATHS.repo);
  if (input.outDir !== undefined) args.push('--bind', input.outDir, SANDBOX_PATHS.out);
  if (input.codeDir !== undefined) args.push('--ro-bind', input.codeDir, SANDBOX_PATHS.code);
  if (input.brokerSocketPath !== undefined) args.push('--bind', input.brokerSocketPath, SANDBOX_PATHS.brokerSocket);
  if (input.hasRequest) args.push('--ro-bind-data', String(FD.request), SANDBOX_PATHS.request);
  // The root tmpfs bwrap builds is writable until now: nothing may be created outside /out and /tmp.
  args.push('--remount-ro', '/');
  args.push('--chdir', input.repoDir !== undefined ? SANDBOX_PATHS.repo : '/');
  args.push('--clearenv');
  const env = { PATH: input.runtime.defaultPath, ...input.env };
  for (const [key, value] of Object.entries(env)) args.push('--setenv', key, value);
  return { options: args, command: input.command };
}

function bwrapArgv(bwrapPath: string, invocation: BwrapInvocation): string[] {
  return [bwrapPath, '--args', String(FD.args), '--', ...invocation.command];
}



function isRetryable(err: unknown): boolean {
  return RETRYABLE_ERRNOS.has((err as NodeJS.ErrnoException | null)?.code ?? '');
}

function sanitizeName(text: string): string {
  return text.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 40);
}

function signalAll(pids: number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // gone already
    }
  }
}

/** The extra pipes (fd 3 and up) Node creates as duplex sockets. */
function pipeAt(child: ChildProcess, fd: number): Duplex | null {
  return (child.stdio as unknown as Array<Duplex | null | undefined>)[fd] ?? null;
}

/** Reads bwrap's `--info-fd` JSON (`{"child-pid": N}`), or null if bwrap exits first. */
function readInfo(stream: Readable, child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    let text = '';
    const done = (pid: number | null): void => {
      clearTimeout(timer);
      child.off('exit', onExit);
      resolve(pid);
    };
    const onExit = (): void => done(null);
    const timer = setTimeout(() => done(null), HANDSHAKE_TIMEOUT_MS);
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      text += chunk;
      const match = /"child-pid"\s*:\s*(\d+)/.exec(text);
      if (match?.[1] !== undefined) done(Number(match[1]));
    });
    stream.on('error', () => done(null));
    stream.on('end', () => done(null));
    child.once('exit', onExit);
  });
}

interface Running {
  child: ChildProcess;
  spec: SandboxSpec;
  cgroup: SandboxCgroup | undefined;
  /** Host pid of the sandbox init (bwrap's child), once `--info-fd` told us. */
  initPid: number | undefined;
  /** True once the init was released (`--block-fd`): the command may be running. */
  released: boolean;
  /** Settles when the launch handshake is over, whatever its outcome. */
  handshakeSettled: Promise<void>;
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

  /** Feeds options and seccomp program, waits for the sandbox init's pid, puts it in the cgroup, releases it. */
  async function handshake(child: ChildProcess, invocation: BwrapInvocation, cgroup: SandboxCgroup | undefined, running?: Pick<Running, 'initPid' | 'released'>): Promise<number | null> {
    for (const fd of [FD.seccomp, FD.block, FD.args]) {
      // Write-only for us, but Node opens them duplex: drain the read side so 'close' can fire.
      pipeAt(child, fd)?.on('error', () => undefined).resume();
    }
    const info = pipeAt(child, FD.info);
    const seccomp = pipeAt(child, FD.seccomp);
    const block = pipeAt(child, FD.block);
    const options = pipeAt(child, FD.args);
    if (info === null || seccomp === null || block === null || options === null) return null;
    info.on('error', () => undefined);
    options.end(Buffer.from(invocation.options.map((o) => `${o}\0`).join(''), 'utf8'));
    seccomp.end(seccompProgram());
    const initPid = await readInfo(info, child);
    if (initPid === null) return null;
    if (running !== undefined) running.initPid = initPid;
    if (cgroup !== undefined) await cgroup.addProcess(initPid);
    block.end('1');
    if (running !== undefined) running.released = true;
    return initPid;
  }

  async function check(): Promise<LauncherCheck> {
    const notOk = (why: string): LauncherCheck => ({ ok: false, reason: `bubblewrap is not usable: ${why}; ${INSTALL_HINT}` });
    try {
      await access(bwrapPath, fsConstants.X_OK);
    } catch {
      return notOk(`${bwrapPath} is missing or not executable`);
    }
    const maxUserNs = (await readFile('/proc/sys/user/max_user_namespaces', 'utf8').catch(() => '1')).trim();
    if (maxUserNs === '0') return notOk('user namespaces are disabled (sysctl user.max_user_namespaces=0)');
    const unprivClone = (await readFile('/proc/sys/kernel/unprivileged_userns_clone', 'utf8').catch(() => '1')).trim();
    if (unprivClone === '0') return notOk('unprivileged user namespaces are disabled (sysctl kernel.unprivileged_userns_clone=0)');
    const nodeProblem = await executableProblem(nodePath, identity.uid, identity.gid).catch((err: Error) => err.message);
    if (nodeProblem !== null) return notOk(`the node runtime is not usable by uid ${identity.uid}: ${nodeProblem}`);
    try {
      await backend();
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
    const trial: Pick<Running, 'initPid' | 'released'> = { initPid: undefined, released: false };
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
    const limits: SandboxLimits = spec.limits;
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
      await prepareHostPaths(spec, as);
      if (as.dropPrivileges) binds = await privateBinds(spec, as);
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
        runtime: rt, tmpfsBytes: limits.tmpfsBytes, repoDir: binds?.repoDir ?? spec.repoDir, outDir: spec.outDir,
        ...(spec.codeDir === undefined ? {} : { codeDir: binds?.codeDir ?? spec.codeDir }),
        ...(spec.brokerSocketPath === undefined ? {} : { brokerSocketPath: spec.brokerSocketPath }),
        hasRequest: requestHandle !== undefined, env: spec.env ?? {}, command: spec.command,
      });
      const child = spawnBwrap([...(binds?.prefix ?? []), ...prefix, ...bwrapArgv(bwrapPath, invocation)], requestHandle?.fd);
      let settleHandshake = (): void => undefined;
      const handshakeSettled = new Promise<void>((resolve) => {
        settleHandshake = resolve;
      });
      const running: Running = { child, spec, cgroup, initPid: undefined, released: false, handshakeSettled };
      const ownCgroup = cgroup;
      cgroup = undefined; // from here on the supervision's exit path removes it
      const handle = startSupervision(running, startedAt, mechanism);
      // The uid and the mount points outlive the launch call: the exit path gives them back.
      const [leased, mounts] = [who, binds];
      who = undefined;
      binds = undefined;
      void handle.exit.finally(() => {
        leased.release();
        void mounts?.cleanup();
      });
      const spawnError = await new Promise<Error | null>((resolve) => {
        child.once('spawn', () => resolve(null));
        child.once('error', (err) => resolve(err));
      });
      await requestHandle?.close();
      requestHandle = undefined;
      if (spawnError !== null) {
        settleHandshake();
        await handle.exit.catch(() => undefined);
        const code = spawnError as NodeJS.ErrnoException;
        if (code.code === 'ENOENT') throw new FusionError('sandbox_unavailable', `bubblewrap is not usable: ${spawnError.message}; ${INSTALL_HINT}`, { cause: spawnError });
        throw new FusionError('launch_failed', `cannot start bwrap: ${spawnError.message}`, { retryable: isRetryable(spawnError), cause: spawnError });
      }
      let initPid: number | null;
      try {
        initPid = await handshake(child, invocation, ownCgroup, running);
      } catch (err) {
        settleHandshake();
        await handle.kill('aborted');
        throw new FusionError('launch_failed', `cannot place the sandbox in its cgroup: ${(err as Error).message}`, { retryable: isRetryable(err), cause: err });
      }
      settleHandshake();
      if (initPid === null) {
        const exit = await handle.kill('aborted').then(() => handle.exit);
        if (spec.signal?.aborted) throw new FusionError('cancelled', 'the launch was aborted before the sandbox started', { details: base });
        // bwrap died before the sandbox existed; namespace exhaustion is transient, option errors are not.
        const transient = /Creating new namespace failed|Resource temporarily unavailable|No space left/i.test(exit.stderrTail);
        throw new FusionError('launch_failed', `bwrap failed before the sandbox started: ${untrusted(exit.stderrTail.trim(), 500)}`, {
          retryable: transient, details: base,
        });
      }
      log.info({ ...base, pid: child.pid, initPid, uid: as.uid, gid: as.gid, limitMechanism: mechanism,
        memoryBytes: limits.memoryBytes, maxProcesses: limits.maxProcesses, wallMs: limits.wallMs, idleMs: limits.idleMs,
        launchMs: Math.round(performance.now() - startedAt) }, 'sandbox launched');
      return handle;
    } catch (err) {
      await requestHandle?.close().catch(() => undefined);
      await cgroup?.destroy().catch(() => undefined);
      await binds?.cleanup().catch(() => undefined);
      who?.release();
      const error = err instanceof FusionError ? err : new FusionError('launch_failed', (err as Error).message, { retryable: isRetryable(err), cause: err });
      log.warn({ ...base, code: error.code, retryable: error.retryable, limitMechanism: mechanism, reason: untrusted(error.message, 500) }, 'sandbox launch failed');
      throw error;
    }
  }

  /** Timers, caps, kill and exit bookkeeping for one running sandbox. */
  function startSupervision(running: Running, startedAt: number, mechanism: LimitMechanism): SandboxHandle & { exit: Promise<SandboxExit> } {
    const { child, spec } = running;
    const limits = spec.limits;
    const stdoutTail = new Tail(TAIL_BYTES);
    const stderrTail = new Tail(TAIL_BYTES);
    let stdoutBytes = 0;
    let stderrBytes = 0;
    let killReason: SandboxExitReason | undefined;
    let killing: Promise<void> | undefined;
    let graceTimer: NodeJS.Timeout | undefined;
    let exited = false;
    let lastActivity = performance.now();

    const sandboxPids = async (): Promise<number[]> => {
      if (running.cgroup !== undefined) return running.cgroup.pids();
      return running.initPid === undefined ? [] : descendantPids(running.initPid);
    };

    const kill = (reason: SandboxExitReason = 'aborted'): Promise<void> => {
      if (exited) return Promise.resolve();
      killReason ??= reason;
      const hardKill = (pids: number[]): void => {
        // The init is named explicitly: it is the one process that must die for the namespace to go.
        signalAll([child.pid, running.initPid, ...pids].filter((pid): pid is number => pid !== undefined), 'SIGKILL');
      };
      killing ??= (async () => {
        // Never kill bwrap in the middle of the handshake: between clone() and the release of its
        // child, a dead bwrap leaves that child blocked forever (before --die-with-parent is armed).
        await running.handshakeSettled;
        if (!running.released) {
          hardKill([]); // the command never started: nothing deserves a grace period
          return;
        }
        // SIGTERM once to every sandbox process, including any that appear during the grace
        // period (a kill right after the release can precede the command's own fork).
        const termed = new Set<number>();
        const termRound = async (): Promise<void> => {
          const fresh = (await sandboxPids()).filter((pid) => !termed.has(pid));
          fresh.forEach((pid) => termed.add(pid));
          signalAll(fresh, 'SIGTERM');
        };
        await termRound();
        const deadline = performance.now() + limits.killGraceMs;
        const tick = (): void => {
          if (exited) return;
          const leftMs = deadline - performance.now();
          if (leftMs <= 0) {
            void sandboxPids().then(hardKill, () => hardKill([]));
            return;
          }
          graceTimer = setTimeout(() => void termRound().finally(tick), Math.min(TERM_POLL_MS, leftMs));
        };
        tick();
      })();
      return exit.then(() => undefined);
    };

    const onData = (stream: 'stdout' | 'stderr') => (chunk: Buffer): void => {
      lastActivity = performance.now();
      const max = stream === 'stdout' ? limits.maxStdoutBytes : limits.maxStderrBytes;
      const before = stream === 'stdout' ? stdoutBytes : stderrBytes;
      const after = before + chunk.length;
      if (stream === 'stdout') stdoutBytes = after;
      else stderrBytes = after;
      if (before < max) {
        // Deliver up to the cap, never a byte beyond it.
        const kept = after > max ? chunk.subarray(0, max - before) : chunk;
        (stream === 'stdout' ? stdoutTail : stderrTail).push(kept);
        (stream === 'stdout' ? spec.onStdout : spec.onStderr)?.(kept);
      }
      if (after > max) void kill('output_cap');
    };
    child.stdout?.on('data', onData('stdout'));
    child.stderr?.on('data', onData('stderr'));

    const wallTimer = setTimeout(() => void kill('wall_timeout'), limits.wallMs);
    let idleTimer: NodeJS.Timeout;
    const armIdle = (delayMs: number): void => {
      idleTimer = setTimeout(() => {
        const quietMs = performance.now() - lastActivity;
        if (quietMs >= limits.idleMs) void kill('idle_timeout');
        else armIdle(limits.idleMs - quietMs);
      }, delayMs);
    };
    armIdle(limits.idleMs);
    const onAbort = (): void => void kill('aborted');

    const exit = new Promise<SandboxExit>((resolve) => {
      let settled = false;
      const finish = async (code: number | null, signal: NodeJS.Signals | null): Promise<void> => {
        if (settled) return;
        settled = true;
        exited = true;
        clearTimeout(wallTimer);
        clearTimeout(idleTimer);
        clearTimeout(graceTimer);
        spec.signal?.removeEventListener('abort', onAbort);
        let signalOut: string | null = signal;
        if (signal === null && code !== null && code > 128 && code - 128 < 65) signalOut = signalName(code - 128);
        const reason: SandboxExitReason = killReason ?? (signalOut !== null ? 'signaled' : 'exited');
        const stats = await running.cgroup?.stats().catch(() => undefined);
        await running.cgroup?.destroy().catch((err: Error) => log.warn({ taskId: spec.taskId, label: spec.label, reason: err.message }, 'sandbox cgroup cleanup failed'));
        const result: SandboxExit = {
          reason, exitCode: code, signal: signalOut, durationMs: Math.round(performance.now() - startedAt),
          stdoutBytes, stderrBytes, stdoutTail: stdoutTail.toString(), stderrTail: stderrTail.toString(),
        };
        log.info({ taskId: spec.taskId, label: spec.label, pid: child.pid, reason, exitCode: code, signal: signalOut,
          durationMs: result.durationMs, stdoutBytes, stderrBytes, limitMechanism: mechanism,
          oomKills: stats?.oomKills, pidsLimitHits: stats?.pidsLimitHits, memoryPeakBytes: stats?.memoryPeakBytes,
          stderrTail: untrusted(result.stderrTail, 300) }, 'sandbox exited');
        resolve(result);
      };
      child.once('close', (code, signal) => void finish(code, signal));
      child.once('exit', () => {
        // Every sandbox process is gone with bwrap (--die-with-parent); if a pipe still has not
        // closed after a moment, stop waiting for it.
        setTimeout(() => {
          for (const stream of child.stdio) (stream as Readable | null)?.destroy();
        }, 2_000).unref();
      });
      child.once('error', () => {
        // Spawn failure: no 'close' follows when the process never existed.
        if (child.pid === undefined) void finish(null, null);
      });
    });

    spec.signal?.addEventListener('abort', onAbort, { once: true });
    if (spec.signal?.aborted) onAbort(); // aborted while the launch was being prepared

    return {
      get pid() {
        return child.pid;
      },
      exit,
      markActivity: () => {
        lastActivity = performance.now();
      },
      kill,
    };
  }

  return {
    name: 'bwrap',
    check,
    launch,
    limitMechanism: async () => (await backend()).mechanism,
  };
}
