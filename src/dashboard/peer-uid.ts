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
 *
 * What it costs, and why it is shaped this way: the tables list every TCP socket of the host,
 * and any local user can make them long (each TIME_WAIT left by a connect-and-close stays listed
 * for a minute and holds no file descriptor). Read synchronously and parsed in full per
 * connection, 18,000 entries took about 0.4 s of the daemon's only thread per accept, so a user
 * outside the socket group could stall the whole daemon (socket API, scheduler) by opening
 * dashboard connections. So the files are read off the event loop (`fs/promises`), one read at a
 * time serves every connection accepted before it started (`PeerUidLookup`), and only the lines
 * that carry the peer's port are parsed.
 */
import { readFile } from 'node:fs/promises';
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

export type ProcReader = (path: string) => Promise<string>;

const readProc: ProcReader = (path) => readFile(path, 'utf8');

/**
 * The entries of a /proc/net/tcp{,6} text that may be the connection from a peer on `port`: only
 * lines where the port appears as `:PPPP ` (the kernel prints ports as 4 upper-case hex digits
 * after the address) are parsed, so a long table costs a substring search, not a parse per line.
 */
export function candidateEntries(text: string, port: number, littleEndian = endianness() === 'LE'): ProcTcpEntry[] {
  const needle = `:${port.toString(16).toUpperCase().padStart(4, '0')} `;
  const lines: string[] = [];
  let lastStart = -1;
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) {
    const start = text.lastIndexOf('\n', at) + 1;
    if (start === 0 || start === lastStart) continue; // the header line, or a line already taken
    lastStart = start;
    const end = text.indexOf('\n', at);
    lines.push(text.slice(start, end === -1 ? text.length : end));
  }
  return parseProcNetTcp(`header\n${lines.join('\n')}`, littleEndian);
}

/** Both tables, read now (an unreadable one reads as empty: its peers are not found). */
async function readTables(read: ProcReader): Promise<string[]> {
  return Promise.all(['/proc/net/tcp', '/proc/net/tcp6'].map((path) => read(path).catch(() => '')));
}

function peerUidIn(tables: readonly string[], peer: TcpEndpoint, server: TcpEndpoint): number | undefined {
  return findPeerUid(tables.flatMap((text) => candidateEntries(text, peer.port)), peer, server);
}

/** The local uid that opened the connection from `peer` to `server`, read from /proc now. */
export async function loopbackPeerUid(peer: TcpEndpoint, server: TcpEndpoint, read: ProcReader = readProc): Promise<number | undefined> {
  return peerUidIn(await readTables(read), peer, server);
}

interface Pending {
  peer: TcpEndpoint;
  server: TcpEndpoint;
  resolve: (uid: number | undefined) => void;
}

/**
 * Peer lookups for many connections with at most one read of the tables in flight: a lookup asked
 * for while a read runs waits for the next read (which starts after it was asked, so it lists the
 * connection), and that one read answers every lookup waiting for it. However fast connections
 * arrive, the daemon reads the tables back to back at most, never once per connection.
 */
export class PeerUidLookup {
  private waiting: Pending[] = [];
  private reading = false;

  constructor(private readonly read: ProcReader = readProc) {}

  lookup(peer: TcpEndpoint, server: TcpEndpoint): Promise<number | undefined> {
    return new Promise((resolve) => {
      this.waiting.push({ peer, server, resolve });
      if (!this.reading) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.reading = true;
    while (this.waiting.length > 0) {
      const batch = this.waiting;
      this.waiting = [];
      const tables = await readTables(this.read);
      for (const p of batch) p.resolve(peerUidIn(tables, p.peer, p.server));
    }
    this.reading = false;
  }
}
