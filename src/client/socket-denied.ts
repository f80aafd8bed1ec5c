/**
 * Why this user may not open a daemon's socket, and who can fix it. A `--socket-group` daemon
 * admits its own user and the members of its group (docs/operations.md#agent-accounts); anyone
 * else is stopped at the socket's directory (0750) or the socket (0660). "No daemon answers"
 * would be wrong (one runs) and starting another would not help, so the message names the
 * group that gates the socket, whether this user belongs to it, and the admin command.
 */
import { readFileSync, statSync, type Stats } from 'node:fs';
import { userInfo } from 'node:os';
import { dirname } from 'node:path';

export interface SocketGate {
  /** The directory or socket this user is stopped at. */
  path: string;
  gid: number;
  /** The group's name, when the group database names it. */
  group?: string;
  /** True when the group database lists this user in the group but this session lacks it. */
  memberNotInSession: boolean;
}

function statOrNull(path: string): Stats | null {
  try {
    return statSync(path);
  } catch {
    return null;
  }
}

/** Whether this process may use `st` for `bits` (owner, group and other triplets: r=4 w=2 x=1). */
function allowed(st: Stats, bits: number, uid: number, groups: ReadonlySet<number>): boolean {
  if (uid === 0) return true;
  const shift = st.uid === uid ? 6 : groups.has(st.gid) ? 3 : 0;
  return ((st.mode >> shift) & bits) === bits;
}

/** A group's name and listed members from /etc/group (undefined when unlisted or unreadable). */
function groupEntry(gid: number): { name: string; members: string[] } | undefined {
  let text: string;
  try {
    text = readFileSync('/etc/group', 'utf8');
  } catch {
    return undefined;
  }
  for (const line of text.split('\n')) {
    const [name, , id, members] = line.split(':');
    if (name !== undefined && Number(id) === gid && id !== '') return { name, members: (members ?? '').split(',').filter(Boolean) };
  }
  return undefined;
}

export function userName(): string {
  try {
    return userInfo().username;
  } catch {
    return `uid ${process.getuid?.() ?? '?'}`;
  }
}

/**
 * The first place on the way to `socketPath` that stops this process: a directory it may not
 * traverse, or the socket it may not write. Undefined when nothing visible stops it.
 */
export function socketGate(socketPath: string): SocketGate | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  const groups = new Set<number>([process.getgid?.() ?? -1, ...(process.getgroups?.() ?? [])]);
  const dirs: string[] = [];
  for (let d = dirname(socketPath); ; d = dirname(d)) {
    dirs.unshift(d);
    if (dirname(d) === d) break;
  }
  const gate = (path: string, st: Stats): SocketGate => {
    const entry = groupEntry(st.gid);
    const me = userName();
    return { path, gid: st.gid, ...(entry ? { group: entry.name } : {}), memberNotInSession: entry?.members.includes(me) === true };
  };
  for (const d of dirs) {
    const st = statOrNull(d);
    if (st === null) return undefined;
    if (!allowed(st, 1, uid, groups)) return gate(d, st);
  }
  const st = statOrNull(socketPath);
  if (st !== null && !allowed(st, 2, uid, groups)) return gate(socketPath, st);
  return undefined;
}

/** The message for a socket this user may not open. */
export function deniedMessage(socketPath: string): string {
  const gate = socketGate(socketPath);
  const me = userName();
  if (gate === undefined) {
    return `permission denied opening the daemon's socket ${socketPath}: it admits only the daemon's user and the members of its --socket-group (an admin adds you with 'usermod -aG GROUP ${me}'; log in again after)`;
  }
  const group = gate.group ?? `gid ${gate.gid}`;
  const where = gate.path === socketPath ? 'the socket' : `its directory ${gate.path}`;
  if (gate.memberNotInSession) {
    return `the fusion daemon at ${socketPath} runs, and ${me} is listed in its group ${group}, but this login session started before that: log in again (or run 'newgrp ${group}') so the session has the group; ${where} admits only that group`;
  }
  return `the fusion daemon at ${socketPath} runs, but ${where} admits only the daemon's user and group ${group}, and ${me} is not in ${group}; ask an admin: sudo usermod -aG ${group} ${me} (then log in again). Starting a daemon of your own would not reach that one`;
}
