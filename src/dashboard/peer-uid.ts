/**
 * The local user behind a loopback TCP connection (docs/security.md#dashboard-callers). A Unix
 * socket has SO_PEERCRED; TCP has nothing like it, but on the same host the kernel lists every
 * TCP socket in /proc/net/tcp and /proc/net/tcp6 with the uid that created it. The peer of a
 * connection we accepted is the ESTABLISHED socket whose local address is our remote one and
 * whose remote address is our local one; its uid is the caller.
 *
 * Why this is sound, and where it is not:
 * - Read at accept, while our end is open. A 4-tuple names one established connection at a time,
 *   so the entry found is our peer, not an earlier user of the same port.
 * - Only state 01 (ESTABLISHED) counts: the kernel lists TIME_WAIT and FIN_WAIT2 minisockets with
 *   uid 0, so a peer that connects and closes at once would otherwise read as root. A peer gone
 *   before the lookup is not found, and the connection is refused.
 * - An IPv4 peer of a dual-stack socket appears as `::ffff:a.b.c.d` to Node and in
 *   /proc/net/tcp6 (or in /proc/net/tcp): both are folded to the plain IPv4 text before matching.
 * - The uid is the socket's creator (like SO_PEERCRED's connect-time credentials): a process that
 *   hands its connected socket to another keeps its own identity on it. A proxy on the host that
 *   forwards to the dashboard is the caller for everyone it forwards (docs/security.md).
 * - Only meaningful for a peer in the daemon's own network namespace: the dashboard listens on
 *   loopback, and a non-loopback address needs a key instead.
 */
import { readFileSync } from 'node:fs';
import { endianness } from 'node:os';
import { isIPv4, isIPv6 } from 'node:net';

export interface TcpEndpoint {
  address: string;
  port: number;
}

export interface ProcTcpEntry {
  local: TcpEndpoint;
  remote: TcpEndpoint;
  /** Hex state: 01 ESTABLISHED, 06 TIME_WAIT, 0A LISTEN… */
  state: string;
  uid: number;
}

const ESTABLISHED = '01';

/** One 32-bit word of /proc/net/tcp's address: the kernel prints the in-memory (network-order) word as a host-order integer. */
function wordBytes(hex: string, littleEndian: boolean): number[] {
  const bytes = [0, 2, 4, 6].map((i) => parseInt(hex.slice(i, i + 2), 16));
  return littleEndian ? bytes.reverse() : bytes;
}

/** `0100007F:1F90` → 127.0.0.1:8080; 32 hex digits → an IPv6 address (v4-mapped folded to IPv4). */
export function parseProcAddress(text: string, littleEndian = endianness() === 'LE'): TcpEndpoint | undefined {
  const m = /^([0-9A-Fa-f]{8}|[0-9A-Fa-f]{32}):([0-9A-Fa-f]{4})$/u.exec(text);
  if (!m) return undefined;
  const hex = m[1]!;
  const port = parseInt(m[2]!, 16);
  if (hex.length === 8) return { address: wordBytes(hex, littleEndian).join('.'), port };
  const bytes: number[] = [];
  for (let i = 0; i < 32; i += 8) bytes.push(...wordBytes(hex.slice(i, i + 8), littleEndian));
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  return { address: canonicalAddress(groups.join(':')), port };
}

/**
 * One spelling per address: IPv4 dotted quad (also for `::ffff:a.b.c.d` and its hex form),
 * IPv6 in the WHATWG form (lower case, zeros compressed); a zone id is dropped.
 */
export function canonicalAddress(address: string): string {
  const bare = address.split('%')[0]!;
  if (isIPv4(bare)) return bare;
  if (!isIPv6(bare)) return bare;
  const host = new URL(`http://[${bare}]/`).hostname.slice(1, -1);
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/u.exec(host);
  if (mapped) {
    const hi = parseInt(mapped[1]!, 16);
    const lo = parseInt(mapped[2]!, 16);
    return [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff].join('.');
  }
  return host;
}

/** The entries of a /proc/net/tcp or tcp6 text (header line skipped, malformed lines ignored). */
export function parseProcNetTcp(text: string, littleEndian = endianness() === 'LE'): ProcTcpEntry[] {
  const out: ProcTcpEntry[] = [];
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/u);
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode …
    if (f.length < 10) continue;
    const local = parseProcAddress(f[1]!, littleEndian);
    const remote = parseProcAddress(f[2]!, littleEndian);
    const uid = Number(f[7]);
    if (local === undefined || remote === undefined || !Number.isSafeInteger(uid)) continue;
    out.push({ local, remote, state: f[3]!.toUpperCase(), uid });
  }
  return out;
}

/**
 * The uid of the ESTABLISHED socket at `peer` connected to `server`, among `entries`; undefined
 * when none (the peer is gone, or is not on this host). Two matches with different uids cannot
 * happen for one 4-tuple; if the tables ever disagree the answer is undefined, never a guess.
 */
export function findPeerUid(entries: readonly ProcTcpEntry[], peer: TcpEndpoint, server: TcpEndpoint): number | undefined {
  const pa = canonicalAddress(peer.address);
  const sa = canonicalAddress(server.address);
  const uids = new Set<number>();
  for (const e of entries) {
    if (e.state !== ESTABLISHED) continue;
    if (e.local.port !== peer.port || e.remote.port !== server.port) continue;
    if (e.local.address !== pa || e.remote.address !== sa) continue;
    uids.add(e.uid);
  }
  return uids.size === 1 ? [...uids][0] : undefined;
}

export type ProcReader = (path: string) => string;

const readProc: ProcReader = (path) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
};

/** The local uid that opened the connection from `peer` to `server`, read from /proc now. */
export function loopbackPeerUid(peer: TcpEndpoint, server: TcpEndpoint, read: ProcReader = readProc): number | undefined {
  const entries = [...parseProcNetTcp(read('/proc/net/tcp')), ...parseProcNetTcp(read('/proc/net/tcp6'))];
  return findPeerUid(entries, peer, server);
}
