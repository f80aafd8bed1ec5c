/**
 * The socket's access rule, decided before anything is created: a bad --socket-group is a
 * start-up error naming the flag.
 */
import { resolve } from 'node:path';
import type { Logger } from '../log.js';
import { FusionError } from '../errors.js';
import type { DaemonConfig } from '../contracts/config.js';
import { MAX_CONNECTIONS_PER_CALLER, type SocketListenOptions } from '../api/socket-server.js';
import { prepareGroupSocketDir, resolveSocketGroup } from '../api/socket-group.js';
import { loadPeerCredReader } from '../api/peer-cred.js';
import { isPrivileged } from '../tasks/caller.js';

/**
 * Who may connect and how each caller is known (docs/security.md#socket-callers). With a socket
 * group the kernel must name every caller: without the addon the daemon refuses to start rather
 * than trust every member alike. Without one, only the daemon's uid (and root) can connect, so
 * a caller the addon cannot read is the daemon's own uid.
 */
export function socketAccess(config: DaemonConfig, log: Logger, addonPath?: string): SocketListenOptions {
  const reader = loadPeerCredReader(addonPath);
  const uid = process.getuid?.() ?? 0;
  const self = { uid, gid: process.getgid?.() ?? 0, pid: process.pid, groups: null };
  const onIdentifyError = (err: Error): void => log.warn({ err: err.message }, 'socket connection refused: its caller could not be read (SO_PEERCRED)');
  if (config.socketGroup === undefined) {
    if ('error' in reader) log.warn({ reason: reader.error }, 'peer credentials unavailable: every socket caller is taken as the daemon\'s uid (the socket is 0600)');
    return 'read' in reader ? { identify: reader.read, onIdentifyError } : { fallbackCaller: self };
  }
  const group = resolveSocketGroup(config.socketGroup);
  if ('error' in reader) {
    throw new FusionError('invalid_config', `--socket-group ${group.name} needs the peer-credential addon to tell callers apart, and it is unavailable: ${reader.error}`, { details: { field: 'socketGroup' } });
  }
  if (uid !== 0) {
    throw new FusionError('invalid_config', `--socket-group ${group.name} needs a root daemon: it checks each caller's repository as that caller (setpriv), which needs CAP_SETUID`, { details: { field: 'socketGroup' } });
  }
  prepareGroupSocketDir(config.socketPath, group, resolve(config.home));
  log.info({ group: group.name, gid: group.gid, socket: config.socketPath }, 'socket shared with a group: its members are callers (SO_PEERCRED)');
  return { group, identify: reader.read, onIdentifyError, perCaller: { maxConnections: MAX_CONNECTIONS_PER_CALLER, unbounded: (caller) => isPrivileged(caller, uid) } };
}
