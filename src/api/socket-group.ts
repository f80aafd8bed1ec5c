/**
 * `--socket-group GROUP` (docs/operations.md#agent-accounts): the socket is 0660 for that group,
 * in a directory the group can reach. The daemon never loosens a directory it did not create
 * (a `--socket` in /root must not make /root group-readable): it creates the socket's own
 * directory 0750 for the group when absent, and otherwise checks, refusing to start with the
 * fix when a member of the group could not reach the socket, or when someone other than root
 * or the daemon could replace it (or take its name while the daemon is down).
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, lstatSync, mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { FusionError } from '../errors.js';

export interface SocketGroup {
  name: string;
  gid: number;
}

const GROUP_LINE = /^([^:]+):[^:]*:(\d+):/u;

/** Resolves a group name (or numeric gid) through NSS (`getent group`), so LDAP groups work too. */
export function resolveSocketGroup(group: string): SocketGroup {
  const wanted = group.trim();
  let line = '';
  if (/^[A-Za-z0-9._-]{1,64}$/u.test(wanted)) {
    try {
      line = execFileSync('getent', ['group', wanted], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 });
    } catch {
      line = '';
    }
  }
  const m = GROUP_LINE.exec(line.split('\n')[0] ?? '');
  if (!m) {
    throw new FusionError('invalid_config', `--socket-group: no group ${JSON.stringify(group)} on this system (getent group found nothing); create it with 'groupadd ${wanted || 'NAME'}' or pass an existing group`, {
      details: { field: 'socketGroup', group },
    });
  }
  return { name: m[1]!, gid: Number(m[2]) };
}

function refuse(message: string, path: string): never {
  throw new FusionError('invalid_config', message, { details: { field: 'socketGroup', path } });
}

/** Whether a member of `gid` (not the owner) gets x on this inode: group bits when it is the group's, else others'. */
function groupTraverses(st: { mode: number; gid: number }, gid: number): boolean {
  return st.gid === gid ? (st.mode & 0o010) !== 0 : (st.mode & 0o001) !== 0;
}

/**
 * Prepares the directory of `socketPath` for `group` before the daemon binds: creates it 0750
 * root:group when absent, checks every directory above it is traversable by the group, and that
 * nobody but the daemon (or the sticky bit) can replace the socket in it.
 */
export function prepareGroupSocketDir(socketPath: string, group: SocketGroup, home: string): void {
  const dir = dirname(socketPath);
  const uid = process.getuid?.() ?? 0;
  const flag = `--socket-group ${group.name}`;
  if (dir === home || dir.startsWith(`${home}/`)) {
    refuse(`${flag}: the socket ${socketPath} is inside the data directory ${home}, which stays 0700 (it holds the database); pass --socket in a directory of its own, e.g. /run/fusion/fusion.sock`, socketPath);
  }
  let created = false;
  try {
    mkdirSync(dir, { mode: 0o750 });
    created = true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EEXIST') refuse(`${flag}: cannot create the socket directory ${dir} (${code ?? (err as Error).message}); create its parent or choose another --socket`, dir);
  }
  const st = lstatSync(dir);
  if (!st.isDirectory()) refuse(`${flag}: ${dir} (the socket's directory) is not a directory`, dir);
  if (created) {
    chownSync(dir, uid, group.gid);
    chmodSync(dir, 0o750);
  } else {
    if (st.uid !== uid && st.uid !== 0) refuse(`${flag}: the socket directory ${dir} belongs to uid ${st.uid}, not the daemon; choose a directory the daemon owns (e.g. /run/fusion)`, dir);
    // Even sticky (/tmp): whoever may create entries there can take the socket's name while the
    // daemon is down and answer the group's clients in its place.
    if ((st.mode & 0o022) !== 0) refuse(`${flag}: the socket directory ${dir} is writable by group or others, who could replace the socket or take its name while the daemon is down; chmod go-w it or choose another --socket (e.g. /run/fusion/fusion.sock)`, dir);
  }
  // Every directory from / down to the socket's must let a member of the group through.
  const chain: string[] = [];
  for (let d = dir; ; d = dirname(d)) {
    chain.unshift(d);
    if (dirname(d) === d) break;
  }
  for (const d of chain) {
    const s = statSync(d);
    // Above the socket's directory: whoever may rename entries there could move it away and put
    // a directory (and socket) of their own in its place. Sticky directories (/tmp) stop that.
    if (d !== dir && ((s.uid !== uid && s.uid !== 0) || ((s.mode & 0o022) !== 0 && (s.mode & 0o1000) === 0))) {
      refuse(`${flag}: ${d}, above the socket, is owned by uid ${s.uid} or writable by group or others (mode ${(s.mode & 0o7777).toString(8)}), who could replace the socket's directory; choose a --socket under directories only root controls (e.g. /run/fusion/fusion.sock)`, d);
    }
    if (!groupTraverses(s, group.gid)) {
      refuse(`${flag}: members of ${group.name} cannot traverse ${d} (mode ${(s.mode & 0o7777).toString(8)}, group ${s.gid}), so they could not reach ${socketPath}; run 'chgrp ${group.name} ${d} && chmod g+x ${d}' (or o+x), or choose another --socket`, d);
    }
  }
}

/** After bind: the socket is the daemon's, 0660 for the group. */
export function shareSocketWithGroup(socketPath: string, group: SocketGroup): void {
  chownSync(socketPath, process.getuid?.() ?? 0, group.gid);
  chmodSync(socketPath, 0o660);
}
