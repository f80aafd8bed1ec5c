/**
 * Who the sandboxed child runs as on the host, and making the bound host paths usable by it.
 *
 * A root daemon never lets a child run as root: bwrap is spawned with an unprivileged uid/gid
 * (default 65534 nobody/nogroup, supplementary groups cleared) and creates an *unprivileged* user
 * namespace mapping that uid to itself, so files the child writes to /out are owned by that uid
 * on the host and a sandbox escape lands in an account that owns nothing. This needs unprivileged
 * user namespaces (`user.max_user_namespaces` > 0 and, on kernels that have it,
 * `kernel.unprivileged_userns_clone=1`).
 *
 * Consequence for operators: bwrap opens every bound host path *as that uid*, so the repository
 * and the code directory must be readable (`o+rx` on directories, `o+r` on files) and every
 * ancestor directory traversable (`o+x`); `/root` (0700) cannot hold them. The launcher makes
 * `/out` and the broker socket the uid's own (chown) and checks the rest before launching, so a
 * permission problem is a clear `launch_failed` rather than a bwrap error.
 *
 * A non-root daemon runs children as its own uid (a sandboxUid would need privileges).
 */
import type { Stats } from 'node:fs';
import { chmod, chown, realpath, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { FusionError } from '../errors.js';

export const DEFAULT_SANDBOX_ID = 65534;

export interface SandboxIdentity {
  uid: number;
  gid: number;
  /** True when the daemon is root and bwrap must be spawned with uid/gid set. */
  dropPrivileges: boolean;
}

export function resolveSandboxIdentity(
  requested: { sandboxUid?: number; sandboxGid?: number },
  current: { uid: number; gid: number },
): SandboxIdentity {
  if (current.uid === 0) {
    const uid = requested.sandboxUid ?? DEFAULT_SANDBOX_ID;
    const gid = requested.sandboxGid ?? (requested.sandboxUid === undefined ? DEFAULT_SANDBOX_ID : uid);
    for (const [name, id] of [['sandboxUid', uid], ['sandboxGid', gid]] as const) {
      if (!Number.isInteger(id) || id <= 0 || id > 0xfffffffe) {
        throw new FusionError('invalid_config', `${name} must be a non-root id (1..4294967294), got ${id}`);
      }
    }
    return { uid, gid, dropPrivileges: true };
  }
  if (requested.sandboxUid !== undefined && requested.sandboxUid !== current.uid) {
    throw new FusionError('invalid_config', 'sandboxUid can only be chosen when the daemon runs as root', {
      details: { sandboxUid: requested.sandboxUid, daemonUid: current.uid },
    });
  }
  return { uid: current.uid, gid: current.gid, dropPrivileges: false };
}

const R = 4;
const W = 2;
const X = 1;

/** Mode bits (rwx as 4/2/1) that apply to uid/gid for this inode (ACLs are not considered). */
export function permittedBits(info: Pick<Stats, 'mode' | 'uid' | 'gid'>, uid: number, gid: number): number {
  if (uid === 0) return R | W | X;
  if (info.uid === uid) return (info.mode >> 6) & 7;
  if (info.gid === gid) return (info.mode >> 3) & 7;
  return info.mode & 7;
}

function describeBits(bits: number): string {
  return `${bits & R ? 'r' : '-'}${bits & W ? 'w' : '-'}${bits & X ? 'x' : '-'}`;
}

/**
 * Why uid/gid cannot use `path` with the given rwx bits, or null when it can: every ancestor of
 * the resolved path must be searchable, the path itself must grant `need`.
 */
export async function accessProblem(path: string, uid: number, gid: number, need: number): Promise<string | null> {
  let real: string;
  try {
    real = await realpath(path);
  } catch (err) {
    return `${path} does not exist (${(err as NodeJS.ErrnoException).code ?? 'error'})`;
  }
  const ancestors: string[] = [];
  for (let dir = dirname(real); ; dir = dirname(dir)) {
    ancestors.unshift(dir);
    if (dir === dirname(dir)) break;
  }
  for (const dir of ancestors) {
    const info = await stat(dir);
    if ((permittedBits(info, uid, gid) & X) === 0) {
      return `${dir} (an ancestor of ${path}) is not searchable by uid ${uid}; it needs o+x or ownership`;
    }
  }
  const info = await stat(real);
  const have = permittedBits(info, uid, gid);
  if ((have & need) !== need) {
    return `${path} grants ${describeBits(have)} to uid ${uid}, needs ${describeBits(need)}`;
  }
  return null;
}

export const ACCESS = { read: R, write: W, exec: X, readDir: R | X, writeDir: R | W | X } as const;

export interface HostPaths {
  repoDir: string;
  outDir: string;
  codeDir?: string;
  brokerSocketPath?: string;
}

function launchError(message: string, details: Record<string, unknown>): FusionError {
  return new FusionError('launch_failed', message, { retryable: false, details });
}

/**
 * Makes /out and the broker socket the sandbox uid's (when dropping from root) and checks that
 * everything bwrap will open as that uid is reachable. Throws non-retryable `launch_failed`.
 */
export async function prepareHostPaths(paths: HostPaths, identity: SandboxIdentity): Promise<void> {
  const { uid, gid } = identity;
  let outInfo: Stats;
  try {
    outInfo = await stat(paths.outDir);
  } catch {
    throw launchError(`outDir ${paths.outDir} does not exist`, { outDir: paths.outDir });
  }
  if (!outInfo.isDirectory()) throw launchError(`outDir ${paths.outDir} is not a directory`, { outDir: paths.outDir });
  if (identity.dropPrivileges) {
    // The child must own /out: its files then land on the host owned by the sandbox uid.
    await chown(paths.outDir, uid, gid);
    if ((outInfo.mode & 0o700) !== 0o700) await chmod(paths.outDir, (outInfo.mode & 0o7777) | 0o700);
    if (paths.brokerSocketPath !== undefined) {
      // connect() on a Unix socket needs write permission on the socket inode.
      await chown(paths.brokerSocketPath, uid, gid).catch((err: NodeJS.ErrnoException) => {
        throw launchError(`broker socket ${paths.brokerSocketPath} cannot be handed to uid ${uid}: ${err.code ?? err.message}`, {
          brokerSocketPath: paths.brokerSocketPath,
        });
      });
    }
  }
  const checks: Array<[string, string | undefined, number]> = [
    ['repoDir', paths.repoDir, ACCESS.readDir],
    ['outDir', paths.outDir, ACCESS.writeDir],
    ['codeDir', paths.codeDir, ACCESS.readDir],
    ['brokerSocketPath', paths.brokerSocketPath, ACCESS.write],
  ];
  for (const [name, path, need] of checks) {
    if (path === undefined) continue;
    const problem = await accessProblem(path, uid, gid, need);
    if (problem !== null) throw launchError(`${name}: ${problem}`, { [name]: path, uid });
  }
}

/** Whether `path` is an executable regular file for uid/gid (for the node runtime check). */
export async function executableProblem(path: string, uid: number, gid: number): Promise<string | null> {
  const problem = await accessProblem(path, uid, gid, ACCESS.read | ACCESS.exec);
  if (problem !== null) return problem;
  const info = await stat(path);
  return info.isFile() ? null : `${path} is not a regular file`;
}
