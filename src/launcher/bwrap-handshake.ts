/**
 * bwrap's start-up handshake over the fds of `FD`: the options and the seccomp program go in on
 * pipes, bwrap reports the sandbox init's host pid on `--info-fd`, and the init waits on
 * `--block-fd` until it has been put in its cgroup, so no sandbox process ever runs outside the
 * caps.
 */
import type { ChildProcess } from 'node:child_process';
import type { Duplex, Readable } from 'node:stream';
import { FD, type BwrapInvocation } from './bwrap-args.js';
import type { SandboxCgroup } from './process-limits.js';
import { seccompProgram } from './seccomp-bpf.js';

const HANDSHAKE_TIMEOUT_MS = 30_000;

/** What the handshake learnt so far (read by the kill path while it is in progress). */
export interface HandshakeProgress {
  /** Host pid of the sandbox init (bwrap's child), once `--info-fd` told us. */
  initPid: number | undefined;
  /** True once the init was released (`--block-fd`): the command may be running. */
  released: boolean;
}

/** The extra pipes (fd 3 and up) Node creates as duplex sockets. */
export function pipeAt(child: ChildProcess, fd: number): Duplex | null {
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

/**
 * Feeds options and seccomp program, waits for the sandbox init's pid, puts it in the cgroup,
 * runs `beforeRelease` (the launcher takes hold of the private /out), releases it.
 */
export async function handshake(child: ChildProcess, invocation: BwrapInvocation, cgroup: SandboxCgroup | undefined, running?: HandshakeProgress, beforeRelease?: () => Promise<void>): Promise<number | null> {
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
  if (beforeRelease !== undefined) await beforeRelease();
  block.end('1');
  if (running !== undefined) running.released = true;
  return initPid;
}

