/**
 * `setpriv` options that make a command run as a socket caller: its uid, gid and supplementary
 * groups (as SO_PEERGROUPS reported them; null → the user's groups from the group database), no
 * capabilities, no new privileges. The repository access check (src/tasks/repo-access.ts) reads
 * as the caller with it; the bundle packer (src/bundles/pack-child.ts) drops to the same `RunAs`
 * by itself, after loading the package as root.
 */
export interface RunAs {
  uid: number;
  gid: number;
  groups: number[] | null;
}

export function setprivArgs(caller: RunAs): string[] {
  const groups = caller.groups === null ? ['--init-groups'] : caller.groups.length > 0 ? ['--groups', caller.groups.join(',')] : ['--clear-groups'];
  return [`--reuid=${caller.uid}`, `--regid=${caller.gid}`, ...groups, '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs'];
}
