/**
 * The peer credentials of a Unix-socket connection, from the kernel (SO_PEERCRED and
 * SO_PEERGROUPS) through the tiny N-API addon in native/peercred: Node 20 has no API for them.
 *
 * The addon is loaded from a fixed path in the package (built by `make build`), never searched
 * for. When it cannot load, `loadPeerCredReader` says why; the daemon decides what that means
 * (with --socket-group it refuses to start: callers it cannot tell apart are not let in).
 */
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Socket } from 'node:net';
import type { CallerIdentity } from '../tasks/caller.js';

/** The package root: this file is src/api/ (sources) or dist/src/api/ (compiled). */
const PACKAGE_ROOT = import.meta.url.endsWith('.ts')
  ? resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')
  : resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export const PEERCRED_ADDON = join(PACKAGE_ROOT, 'native', 'peercred', 'build', 'Release', 'peercred.node');

interface Addon {
  peerCred(fd: number): CallerIdentity;
}

export type PeerCredReader = (socket: Socket) => CallerIdentity;

/** The reader, or the reason the addon could not be loaded (path and error). */
export function loadPeerCredReader(addonPath: string = PEERCRED_ADDON): { read: PeerCredReader } | { error: string } {
  let addon: Addon;
  try {
    addon = createRequire(import.meta.url)(addonPath) as Addon;
    if (typeof addon.peerCred !== 'function') return { error: `${addonPath} does not export peerCred` };
  } catch (err) {
    return { error: `cannot load ${addonPath} (${(err as Error).message.split('\n')[0] ?? ''}); run 'make build'` };
  }
  return { read: (socket) => addon.peerCred(socketFd(socket)) };
}

/** The file descriptor under a net.Socket (Node keeps it on the libuv handle; not a public API). */
function socketFd(socket: Socket): number {
  const fd = (socket as unknown as { _handle?: { fd?: unknown } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) throw new Error('the connection has no file descriptor (closed, or not a Unix socket)');
  return fd;
}
