/**
 * What a root daemon mounts for one bwrap sandbox before bwrap runs, in a private mount namespace
 * that dies with the sandbox (docs/security.md#private-repos, #isolation-tiers):
 *
 *   setpriv --pdeathsig KILL -- unshare --mount --propagation private -- sh -c '<mounts>; exec "$@"' \
 *     setpriv --reuid=U --regid=U --clear-groups --pdeathsig KILL -- [prlimit …] bwrap …
 *
 * - the repository and the child code, bound onto empty root-owned mount points, non-recursively
 *   (mounts below the repository stay hidden, as with Docker's `NonRecursive`). bwrap runs as the
 *   attempt's uid and opens its bind sources as that uid, so a repository under a 0700 directory
 *   would otherwise need `o+x` on every ancestor (bwrap 0.8's `--ro-bind-fd` resolves the
 *   descriptor back to its path, which walks those same ancestors). The repository is bound
 *   through a descriptor opened first and checked to still name the physical path the task
 *   recorded: a caller who swaps a directory on that path for a symlink after the submit-time
 *   check gets exit 97, not another directory;
 * - `/tmp`: a tmpfs of the /tmp cap, `noexec,nosuid,nodev` (bwrap 0.8's own `--tmpfs` takes no
 *   mount flags, and a bind keeps its source's flags, which bwrap's user namespace cannot clear);
 * - `/out`: a tmpfs the kernel caps at the /out limits, `noexec,nosuid,nodev`, the uid's own
 *   (`out-mount.ts`). The launcher holds a descriptor of its root from the handshake on, so the
 *   tree outlives the namespace long enough to be copied to the host once the sandbox is gone.
 *
 * Nothing of it is on the host's mount table and nothing is created on the host per sandbox: the
 * mount points are fixed directories under `/run/fusion-sandbox-mnt` (root's, made once, never
 * written to), shadowed in each sandbox's own namespace. A daemon killed at any moment leaves no
 * mount and no directory behind. Both setpriv steps set the parent-death signal (the second
 * again, as a change of uid clears it), so a daemon killed before bwrap's own
 * `--die-with-parent` takes hold still takes the launch with it.
 *
 * All exec'd steps keep the pid: the process the launcher spawned is bwrap itself by the time the
 * handshake starts (so the kill path is unchanged), and the inherited pipes (fds 3…) pass through.
 *
 * What the uid still cannot do is read a file or list a directory *inside* the repository whose
 * own mode denies "others" (a 0600 file): the tools report it as unreadable. Idmapped mounts
 * would lift that, but need util-linux 2.39+ (`X-mount.idmap`) or a helper calling
 * mount_setattr(2); this host's 2.38 has neither, and a per-attempt snapshot costs a copy of the
 * repository for each of the six sandboxes of a task, so neither is done.
 */
import { lstatSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { FusionError } from '../errors.js';
import { outMountOptions } from './out-mount.js';
import type { OutDirCaps } from './out-dir-usage.js';

export const UNSHARE_PATH = '/usr/bin/unshare';
export const SETPRIV_PATH = '/usr/bin/setpriv';
/** Root's fixed mount points, shadowed per sandbox in its private namespace. */
export const PRIVATE_MOUNT_BASE = '/run/fusion-sandbox-mnt';
const POINTS = ['repo', 'code', 'tmp', 'out'] as const;

export const REPO_CHANGED_EXIT = 97;
// `cd -P` and `$PWD` are shell built-ins: the check forks nothing. `--no-canonicalize` keeps
// mount(8) from walking the path again.
const BIND_SCRIPT = 'set -e; [ -z "$1" ] || { exec 9<"$1"; cd -P /proc/self/fd/9; [ "$PWD" = "$1" ] '
  + `|| { echo "fusion-binds: the repository path $1 changed since it was checked" >&2; exit ${REPO_CHANGED_EXIT}; }; cd /; `
  + 'mount --no-canonicalize --bind /proc/self/fd/9 "$2"; exec 9<&-; }; [ -z "$3" ] || mount --bind "$3" "$4"; '
  + 'mount -t tmpfs -o "$5" tmpfs "$6"; [ -z "$7" ] || mount -t tmpfs -o "$7" tmpfs "$8"; shift 8; exec "$@"';

export interface PrivateBinds {
  /** argv before the bwrap command (the rlimit prefix, if any, goes after it). */
  prefix: string[];
  /** Where bwrap finds the repository and the code (the private mount points). */
  repoDir?: string;
  codeDir?: string;
  /** Where bwrap finds /tmp (always) and /out (when asked for): the private tmpfs mounts. */
  tmpDir: string;
  outDir?: string;
}

const readyBases = new Set<string>();

/** Creates the fixed mount points once per process; refuses a base another user could have shaped. */
export function ensureMountBase(base: string = PRIVATE_MOUNT_BASE): void {
  if (readyBases.has(base)) return;
  mkdirSync(base, { recursive: true, mode: 0o755 });
  for (const path of [base, ...POINTS.map((p) => join(base, p))]) {
    try {
      mkdirSync(path, { mode: 0o755 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const info = lstatSync(path);
    if (!info.isDirectory() || info.uid !== 0 || (info.mode & 0o022) !== 0) {
      throw new FusionError('launch_failed', `sandbox mount point ${path} must be a directory owned by root and not group/world writable; remove it and retry`, { retryable: false });
    }
  }
  readyBases.add(base);
}

export interface PrivateBindInput {
  repoDir?: string;
  codeDir?: string;
  /** The /tmp cap in bytes. */
  tmpfsBytes: number;
  /** Caps of a private /out tmpfs; absent: no /out mount. */
  out?: OutDirCaps;
}

export function privateBinds(input: PrivateBindInput, ids: { uid: number; gid: number }, base: string = PRIVATE_MOUNT_BASE): PrivateBinds {
  ensureMountBase(base);
  const [repoMount, codeMount, tmpMount, outMount] = POINTS.map((p) => join(base, p)) as [string, string, string, string];
  const tmpOptions = `size=${input.tmpfsBytes},mode=0700,uid=${ids.uid},gid=${ids.gid},noexec,nosuid,nodev`;
  const outOptions = input.out === undefined ? '' : outMountOptions(input.out, ids.uid, ids.gid);
  const prefix = [
    SETPRIV_PATH, '--pdeathsig', 'KILL', '--',
    UNSHARE_PATH, '--mount', '--propagation', 'private', '--',
    '/bin/sh', '-c', BIND_SCRIPT, 'fusion-binds', input.repoDir ?? '', repoMount, input.codeDir ?? '', codeMount,
    tmpOptions, tmpMount, outOptions, outMount,
    SETPRIV_PATH, `--reuid=${ids.uid}`, `--regid=${ids.gid}`, '--clear-groups', '--pdeathsig', 'KILL', '--',
  ];
  return {
    prefix,
    ...(input.repoDir === undefined ? {} : { repoDir: repoMount }),
    ...(input.codeDir === undefined ? {} : { codeDir: codeMount }),
    tmpDir: tmpMount,
    ...(input.out === undefined ? {} : { outDir: outMount }),
  };
}
