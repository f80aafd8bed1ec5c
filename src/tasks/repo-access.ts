/**
 * Whether a (non-root) caller could read a repository itself (docs/security.md#socket-callers).
 *
 * The daemon reads repositories as root, so without this check any member of the socket group
 * could have the sandbox read a directory only root may read. The kernel decides, as the caller:
 * a short helper runs under `setpriv` with the caller's uid, gid and supplementary groups (from
 * SO_PEERGROUPS, i.e. exactly the groups the caller's process had) and no capabilities, `cd`s to
 * the path (x on every directory above it, symlinks followed as the caller), tests r on it and
 * prints its physical path. So ACLs, LSMs and mount options count, not a re-implementation of
 * the mode bits; and a path that does not exist and one the caller cannot reach give the same
 * answer (nothing is learnt about paths the caller cannot see).
 *
 * The physical path is what the task records: a symlink the caller swaps after the check does
 * not move the task elsewhere. What remains is a rename race on a directory the caller owns
 * (replace a checked component with a symlink between the check and the sandbox's bind); it is
 * closed only where the sandbox opens the repository through a descriptor taken at this check
 * (see docs/security.md#socket-callers).
 */
import { execFile } from 'node:child_process';
import { FusionError } from '../errors.js';
import type { CallerIdentity } from './caller.js';
import { setprivArgs } from '../common/setpriv-args.js';

/** The check run as the caller: physical path of $1 when it is a directory the caller can read and enter. */
const CHECK_SCRIPT = 'cd -P -- "$1" 2>/dev/null && test -r . && pwd -P';

export type RepoAccessCheck = (repo: string, caller: CallerIdentity) => Promise<string>;

/** Resolves `repo` as `caller`, or refuses with invalid_input naming `repo` (nothing is created before this runs). */
export const checkRepoAsCaller: RepoAccessCheck = (repo, caller) =>
  new Promise((resolve, reject) => {
    const args = [...setprivArgs(caller), '--', '/bin/sh', '-c', CHECK_SCRIPT, 'fusion-repo-check', repo];
    execFile('setpriv', args, { encoding: 'utf8', timeout: 10_000, cwd: '/', env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } }, (err, stdout, stderr) => {
      // Exactly pwd's line, never trimmed: a directory whose name ends in whitespace ("/tmp/x "
      // or "/tmp/x\n", reached through a symlink) would otherwise be recorded as another
      // directory ("/tmp/x") that the caller was never checked against. Such a path is refused.
      const physical = stdout.endsWith('\n') ? stdout.slice(0, -1) : '';
      if (err === null && physical.startsWith('/') && physical === physical.trim()) return resolve(physical);
      const spawnFailed = err !== null && (typeof (err as NodeJS.ErrnoException).code === 'string' || (err as { killed?: boolean }).killed === true);
      if (spawnFailed || /setpriv:/u.test(stderr)) {
        // The helper itself failed (setpriv missing, no CAP_SETUID): the repository was not judged.
        return reject(new FusionError('internal_error', `could not check repo ${repo} as uid ${caller.uid}: ${(stderr.trim() || (err as Error).message).slice(0, 300)}`, { details: { field: 'repo' } }));
      }
      reject(new FusionError('invalid_input', `repo ${repo} is not a directory uid ${caller.uid} can read: checked as that user (r-x on it, x on every directory above it); nothing was created`, {
        details: { field: 'repo', uid: caller.uid, reason: 'not_readable_by_caller' },
      }));
    });
  });
