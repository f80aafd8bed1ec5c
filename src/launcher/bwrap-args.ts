/**
 * bwrap's command line, as data: the namespace flags, the fds of the start-up handshake and the
 * mounts of one sandbox. Pure (no I/O), so the exact options are unit-tested; `bwrap.ts` runs them.
 */
import { SANDBOX_PATHS } from './port.js';

/**
 * Child-side fds: 3 seccomp program, 4 info (bwrap → us), 5 block (us → bwrap), 6 bwrap's options
 * (`--args`: keeps host paths and env values out of the sandbox init's /proc/1/cmdline), 7 request.
 */
export const FD = { seccomp: 3, info: 4, block: 5, args: 6, request: 7 } as const;

const NAMESPACE_FLAGS = [
  '--unshare-all', '--unshare-user', '--disable-userns', '--die-with-parent', '--new-session',
  '--cap-drop', 'ALL', '--hostname', 'sandbox',
];

/** How the node runtime is made available inside (see `bwrap-runtime-binds.ts`). */
export interface Runtime {
  /** Read-only binds of the runtime (node and its libraries). */
  mountArgs: string[];
  defaultPath: string;
}

export interface BwrapArgsInput {
  runtime: Runtime;
  tmpfsBytes: number;
  /** A host `noexec` tmpfs to bind at /tmp (root daemon); else bwrap's own (exec-able) tmpfs. */
  tmpDir?: string;
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
  if (input.tmpDir !== undefined) args.push('--bind', input.tmpDir, SANDBOX_PATHS.tmp);
  else args.push('--size', String(input.tmpfsBytes), '--perms', '1777', '--tmpfs', SANDBOX_PATHS.tmp);
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

/** bwrap's own argv: everything but the command comes on the `--args` fd. */
export function bwrapArgv(bwrapPath: string, invocation: BwrapInvocation): string[] {
  return [bwrapPath, '--args', String(FD.args), '--', ...invocation.command];
}
