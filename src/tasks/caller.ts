/**
 * Who is asking (docs/security.md#socket-callers). The identity comes from the kernel
 * (SO_PEERCRED on the Unix socket), never from anything the caller sends: a header is only the
 * caller's claim.
 */

export interface CallerIdentity {
  uid: number;
  gid: number;
  /** The caller's pid at connect time (logs only: a pid can be reused). */
  pid: number;
  /** Supplementary groups at connect time; null when the kernel cannot say (SO_PEERGROUPS absent). */
  groups: number[] | null;
}

/**
 * Root and the daemon's own uid see and may do everything: root can read the daemon's
 * database anyway, and the daemon's uid is the only one on a socket without --socket-group.
 */
export function isPrivileged(caller: CallerIdentity, daemonUid: number): boolean {
  return caller.uid === 0 || caller.uid === daemonUid;
}

/**
 * Whether `caller` may see a task recorded with `ownerUid`. Tasks from before callers were
 * recorded (null) belong to the privileged callers only.
 */
export function maySeeTask(caller: CallerIdentity | undefined, ownerUid: number | null, daemonUid: number): boolean {
  if (caller === undefined || isPrivileged(caller, daemonUid)) return true;
  return ownerUid !== null && ownerUid === caller.uid;
}

/** The admission label of a caller the daemon does not trust to choose one: its uid. */
export function uidLabel(uid: number): string {
  return `uid:${uid}`;
}
