/**
 * How a root daemon gives an unprivileged bwrap the repository and the child code without making
 * them (or their parents) readable to that uid (docs/security.md#private-repos).
 *
 * bwrap runs as the attempt's uid and opens its bind sources as that uid, so a repository under
 * a 0700 directory (root's home, a user's home) would need `o+x` on every ancestor. bwrap 0.8's
 * `--ro-bind-fd` does not help: it resolves the descriptor back to its path (realpath), which
 * walks those same ancestors. Instead the launch runs in a private mount namespace made by root:
 *
 *   unshare --mount --propagation private -- sh -c '<bind repo, bind code>; exec "$@"' \
 *     setpriv --reuid=U --regid=U --clear-groups -- [prlimit …] bwrap …
 *
 * Root binds the repository (and the code directory) onto empty root-owned 0755 mount points,
 * non-recursively (mounts below the repository stay hidden, as with Docker's `NonRecursive`);
 * then drops to the attempt uid and execs bwrap, which binds those mount points read-only at
 * /repo and /opt/fusion. `/out` is bound the same way, read-write but `noexec,nosuid,nodev` (a
 * bind keeps its source's flags and bwrap's user namespace cannot clear them): otherwise a child
 * would write a binary to /out and run it, and the noexec /tmp would be moot. The host mount table never changes (the namespace dies with bwrap), the
 * repository's own modes are untouched, nothing is copied. What the uid still cannot do is read
 * a file or list a directory *inside* the repository whose own mode denies "others" (a 0600
 * file): the tools report it as unreadable. Idmapped mounts would lift that, but need
 * util-linux 2.39+ (`X-mount.idmap`) or a helper calling mount_setattr(2); this host's 2.38 has
 * neither, and a per-attempt snapshot costs a copy of the repository for each of the six
 * sandboxes of a task, so neither is done.
 *
 * All exec'd steps keep the pid: the process the launcher spawned is bwrap itself by the time the
 * handshake starts (so `--die-with-parent` and the kill path are unchanged), and the inherited
 * pipes (fds 3…) pass through untouched.
 */
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const UNSHARE_PATH = '/usr/bin/unshare';
export const SETPRIV_PATH = '/usr/bin/setpriv';

/**
 * `$1`→`$2` and `$3`→`$4`, and `$5`→`$6` made `noexec,nosuid,nodev` (an empty source skips the
 * pair), then the real command.
 */
// The repository is bound through a descriptor opened first and checked to still name the
// physical path the task recorded (docs/security.md#private-repos): a caller who swaps a
// directory on that path for a symlink after the submit-time check gets exit 97, not another
// directory. `--no-canonicalize` keeps mount(8) from walking the path again.
export const REPO_CHANGED_EXIT = 97;
const BIND_SCRIPT = 'set -e; [ -z "$1" ] || { exec 9<"$1"; [ "$(readlink /proc/self/fd/9)" = "$1" ] '
  + `|| { echo "fusion-binds: the repository path $1 changed since it was checked" >&2; exit ${REPO_CHANGED_EXIT}; }; `
  + 'mount --no-canonicalize --bind /proc/self/fd/9 "$2"; exec 9<&-; }; [ -z "$3" ] || mount --bind "$3" "$4"; '
  + '[ -z "$5" ] || { mount --bind "$5" "$6"; mount -o remount,bind,noexec,nosuid,nodev "$6"; }; shift 6; exec "$@"';

export interface PrivateBinds {
  /** argv before the bwrap command (the rlimit prefix, if any, goes after it). */
  prefix: string[];
  /** Where bwrap finds the repository and the code (the private mount points). */
  repoDir?: string;
  codeDir?: string;
  /** Where bwrap finds /out: the same directory, on a `noexec` bind (writes land in the host's). */
  outDir?: string;
  /** Removes the (empty) mount points once the sandbox is gone. */
  cleanup(): Promise<void>;
}

export async function privateBinds(paths: { repoDir?: string; codeDir?: string; outDir?: string }, ids: { uid: number; gid: number }): Promise<PrivateBinds> {
  const root = await mkdtemp(join(tmpdir(), 'fusion-binds-'));
  await chmod(root, 0o755);
  const repoMount = join(root, 'repo');
  const codeMount = join(root, 'code');
  await mkdir(repoMount, { mode: 0o755 });
  const outMount = join(root, 'out');
  await mkdir(codeMount, { mode: 0o755 });
  await mkdir(outMount, { mode: 0o755 });
  const prefix = [
    UNSHARE_PATH, '--mount', '--propagation', 'private', '--',
    '/bin/sh', '-c', BIND_SCRIPT, 'fusion-binds', paths.repoDir ?? '', repoMount, paths.codeDir ?? '', codeMount, paths.outDir ?? '', outMount,
    SETPRIV_PATH, `--reuid=${ids.uid}`, `--regid=${ids.gid}`, '--clear-groups', '--',
  ];
  return {
    prefix,
    ...(paths.repoDir === undefined ? {} : { repoDir: repoMount }),
    ...(paths.codeDir === undefined ? {} : { codeDir: codeMount }),
    ...(paths.outDir === undefined ? {} : { outDir: outMount }),
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
}
