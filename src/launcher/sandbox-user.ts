/**
 * Who the sandboxed child runs as on the host, and making the bound host paths usable by it.
 *
 * A root daemon never lets a child run as root: each sandbox runs as a uid leased for it alone
 * (`uid-pool.ts`, supplementary groups cleared); bwrap creates an *unprivileged* user namespace
 * mapping that uid to itself, so files the child writes to /out are owned by that uid on the host
 * and a sandbox escape lands in an account that owns nothing but its own attempt. This needs
 * unprivileged user namespaces (`user.max_user_namespaces` > 0 and, on kernels that have it,
 * `kernel.unprivileged_userns_clone=1`).
 *
 * bwrap opens its bind sources as that uid: the repository and the code directory are bound
 * privately by root first (`private-binds.ts`), so only the directories themselves must be
 * readable, not their ancestors; /out and the broker socket must be reachable (the staging run
 * root is 0711). The launcher makes `/out` and the broker socket the uid's own (chown, 0700 and
 * 0600) and checks the rest before launching, so a permission problem is a clear
 * `launch_failed` rather than a bwrap error.
 *
 * A non-root daemon runs children as its own uid (changing uid needs privileges).
 */
import type { Stats } from 'node:fs';
import { chmod, chown, realpath, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { FusionError } from '../errors.js';

export interface SandboxIdentity {
  uid: number;
  gid: number;
  /** True when the daemon is root: every sandbox runs as a uid leased for it (`sandbox-lease.ts`). */
  dropPrivileges: boolean;
}

/**
 * The launcher's base identity. A root daemon's is a stand-in (the range's first id, for the
 * readiness checks only): each launch leases its own uid from the pool. A non-root daemon's
 * sandboxes run as the daemon's own uid.
 */
export function resolveSandboxIdentity(range: { start: number }, current: { uid: number; gid: number }): SandboxIdentity {
  if (current.uid === 0) return { uid: range.start, gid: range.start, dropPrivileges: true };
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

/** Why uid/gid cannot use the directory `path` itself with the given bits (its ancestors are not considered). */
export async function inodeProblem(path: string, uid: number, gid: number, need: number): Promise<string | null> {
  let info: Stats;
  try {
    info = await stat(path);
  } catch (err) {
    return `${path} does not exist (${(err as NodeJS.ErrnoException).code ?? 'error'})`;
  }
  const have = permittedBits(info, uid, gid);
  return (have & need) === need ? null : `${path} grants ${describeBits(have)} to uid ${uid}, needs ${describeBits(need)}`;
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
export async function prepareHostPaths(paths: HostPaths, identity: SandboxIdentity, options: { outOnTmpfs?: boolean } = {}): Promise<void> {
  const { uid, gid } = identity;
  let outInfo: Stats;
  try {
    outInfo = await stat(paths.outDir);
  } catch {
    throw launchError(`outDir ${paths.outDir} does not exist`, { outDir: paths.outDir });
  }
  if (!outInfo.isDirectory()) throw launchError(`outDir ${paths.outDir} is not a directory`, { outDir: paths.outDir });
  const outOnTmpfs = options.outOnTmpfs === true;
  if (identity.dropPrivileges && !outOnTmpfs) {
    // The child must own /out, and no other uid may enter it: its files then land on the host
    // owned by the sandbox uid, readable by that uid and root only.
    await chown(paths.outDir, uid, gid);
    await chmod(paths.outDir, 0o700);
  }
  if (identity.dropPrivileges) {
    if (paths.brokerSocketPath !== undefined) {
      // connect() on a Unix socket needs write permission on the socket inode.
      await chown(paths.brokerSocketPath, uid, gid).then(() => chmod(paths.brokerSocketPath!, 0o600)).catch((err: NodeJS.ErrnoException) => {
        throw launchError(`broker socket ${paths.brokerSocketPath} cannot be handed to uid ${uid}: ${err.code ?? err.message}`, {
          brokerSocketPath: paths.brokerSocketPath,
        });
      });
    }
  }
  // A root daemon binds the repository and the code privately (`private-binds.ts`): their
  // ancestors need not be reachable by the uid, only the directories themselves.
  const privately = identity.dropPrivileges;
  const checks: Array<[string, string | undefined, number, boolean]> = [
    ['repoDir', paths.repoDir, ACCESS.readDir, privately],
    // On its own tmpfs the sandbox never opens the host outDir (the daemon copies into it).
    ...(outOnTmpfs ? [] : [['outDir', paths.outDir, ACCESS.writeDir, false] as [string, string, number, boolean]]),
    ['codeDir', paths.codeDir, ACCESS.readDir, privately],
    ['brokerSocketPath', paths.brokerSocketPath, ACCESS.write, false],
  ];
  for (const [name, path, need, inodeOnly] of checks) {
    if (path === undefined) continue;
    const problem = inodeOnly ? await inodeProblem(path, uid, gid, need) : await accessProblem(path, uid, gid, need);
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
