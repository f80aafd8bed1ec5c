/**
 * The loopback peer's uid from /proc/net/tcp{,6} text (fixtures in the kernel's own layout,
 * little-endian words as an x86 or arm64 host prints them).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/wait.js';
import { PeerUidLookup, candidateEntries, canonicalAddress, findPeerUid, loopbackPeerUid, parseProcAddress, parseProcNetTcp, type ProcReader } from '../../../src/dashboard/peer-uid.js';

const FIXTURES = join(import.meta.dirname, '..', '..', 'fixtures', 'dashboard');
const tcp4 = readFileSync(join(FIXTURES, 'proc-net-tcp.txt'), 'utf8');
const tcp6 = readFileSync(join(FIXTURES, 'proc-net-tcp6.txt'), 'utf8');
const entries = [...parseProcNetTcp(tcp4, true), ...parseProcNetTcp(tcp6, true)];

describe('parseProcAddress', () => {
  it('reads IPv4 words in host order and the port in hex', () => {
    expect(parseProcAddress('0100007F:1F90', true)).toEqual({ address: '127.0.0.1', port: 8080 });
    expect(parseProcAddress('7F000001:1F90', false)).toEqual({ address: '127.0.0.1', port: 8080 });
  });
  it('reads IPv6 as four host-order words, and folds v4-mapped addresses to IPv4', () => {
    expect(parseProcAddress('00000000000000000000000001000000:0050', true)).toEqual({ address: '::1', port: 80 });
    expect(parseProcAddress('0000000000000000FFFF00000100007F:0050', true)).toEqual({ address: '127.0.0.1', port: 80 });
  });
  it('refuses what is not an address', () => {
    expect(parseProcAddress('0100007F', true)).toBeUndefined();
    expect(parseProcAddress('XYZ0007F:1F90', true)).toBeUndefined();
  });
});

describe('canonicalAddress', () => {
  it('gives one spelling per address', () => {
    expect(canonicalAddress('::ffff:127.0.0.1')).toBe('127.0.0.1');
    expect(canonicalAddress('::FFFF:7f00:1')).toBe('127.0.0.1');
    expect(canonicalAddress('0:0:0:0:0:0:0:1')).toBe('::1');
    expect(canonicalAddress('fe80::1%lo')).toBe('fe80::1');
    expect(canonicalAddress('127.0.0.1')).toBe('127.0.0.1');
  });
});

describe('findPeerUid', () => {
  const server = { address: '127.0.0.1', port: 8080 };
  it('finds the ESTABLISHED client socket of the connection, not the server side', () => {
    expect(findPeerUid(entries, { address: '127.0.0.1', port: 0x9c40 }, server)).toBe(1001);
  });
  it('never reads a TIME_WAIT entry (the kernel lists those with uid 0) as the caller', () => {
    expect(findPeerUid(entries, { address: '127.0.0.1', port: 0x9c41 }, server)).toBeUndefined();
  });
  it('matches the whole 4-tuple: the same port from another loopback address is another connection', () => {
    expect(findPeerUid(entries, { address: '127.0.0.2', port: 0x9c42 }, server)).toBe(1002);
    expect(findPeerUid(entries, { address: '127.0.0.1', port: 0x9c42 }, server)).toBeUndefined();
  });
  it('reads IPv6 loopback and IPv4-mapped peers, whichever spelling Node gives', () => {
    expect(findPeerUid(entries, { address: '::1', port: 0xa000 }, { address: '::1', port: 0x1f91 })).toBe(1003);
    expect(findPeerUid(entries, { address: '::ffff:127.0.0.1', port: 0xa001 }, { address: '::ffff:127.0.0.1', port: 0x1f92 })).toBe(1004);
    expect(findPeerUid(entries, { address: '127.0.0.1', port: 0xa001 }, { address: '127.0.0.1', port: 0x1f92 })).toBe(1004);
  });
  it('answers nothing rather than guess when two entries disagree', () => {
    const twice = [...entries, { ...entries.find((e) => e.uid === 1001)!, uid: 1005 }];
    expect(findPeerUid(twice, { address: '127.0.0.1', port: 0x9c40 }, server)).toBeUndefined();
  });
  it('skips malformed lines', () => {
    expect(parseProcNetTcp(tcp4, true)).toHaveLength(5);
  });
});

describe('loopbackPeerUid on this host', () => {
  it('names this process\'s own uid for a real loopback connection, and nothing once the peer is gone', async () => {
    const accepted: Socket[] = [];
    const server = createServer((s) => accepted.push(s));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    const client = connect(port, '127.0.0.1');
    await new Promise<void>((r) => client.once('connect', r));
    const peer = { address: client.localAddress!, port: client.localPort! };
    expect(await loopbackPeerUid(peer, { address: '127.0.0.1', port })).toBe(process.getuid!());
    client.destroy();
    // The client's socket leaves ESTABLISHED (FIN_WAIT, then TIME_WAIT with uid 0): no caller any more.
    await waitFor('the closed client to leave ESTABLISHED', async () => (await loopbackPeerUid(peer, { address: '127.0.0.1', port })) === undefined);
    for (const s of accepted) s.destroy();
    await new Promise((r) => server.close(r));
  });
});

describe('candidateEntries', () => {
  it("parses only the lines that carry the peer's port, and finds what a full parse finds", () => {
    const server = { address: '127.0.0.1', port: 8080 };
    for (const port of [0x9c40, 0x9c41, 0x9c42]) {
      const few = [...candidateEntries(tcp4, port, true), ...candidateEntries(tcp6, port, true)];
      expect(few.length).toBeLessThan(entries.length);
      for (const address of ['127.0.0.1', '127.0.0.2']) {
        expect(findPeerUid(few, { address, port }, server)).toBe(findPeerUid(entries, { address, port }, server));
      }
    }
    expect(findPeerUid(candidateEntries(tcp6, 0xa001, true), { address: '127.0.0.1', port: 0xa001 }, { address: '127.0.0.1', port: 0x1f92 })).toBe(1004);
    expect(candidateEntries(tcp4, 0x1234, true)).toEqual([]);
  });
});

describe('PeerUidLookup', () => {
  const server = { address: '127.0.0.1', port: 8080 };
  const peer = { address: '127.0.0.1', port: 0x9c40 };

  it('answers a burst of lookups from one or two reads of the tables, not one read per connection', async () => {
    // A long table makes every read expensive (any local user can make it long): reads must not scale with connections.
    let reads = 0;
    const read: ProcReader = async (path) => {
      reads += 1;
      await new Promise((r) => setImmediate(r));
      return path.endsWith('6') ? tcp6 : tcp4;
    };
    const lookup = new PeerUidLookup(read);
    const answers = await Promise.all(Array.from({ length: 200 }, () => lookup.lookup(peer, server)));
    expect(new Set(answers)).toEqual(new Set([1001]));
    // The first lookup starts a read; the 199 asked while it ran share the next one.
    expect(reads).toBe(4);
  });

  it('answers a lookup asked during a read from a later read, which lists the new connection', async () => {
    const empty = 'header\n';
    let release: (() => void) | undefined;
    let calls = 0;
    const read: ProcReader = async (path) => {
      calls += 1;
      if (calls <= 2) {
        // The first read: it began before the second connection existed, so it does not list it.
        if (path.endsWith('6')) await new Promise<void>((r) => (release = r));
        return empty;
      }
      return path.endsWith('6') ? tcp6 : tcp4;
    };
    const lookup = new PeerUidLookup(read);
    const first = lookup.lookup({ address: '127.0.0.1', port: 1 }, server);
    await waitFor('the first read to start', () => release !== undefined);
    const second = lookup.lookup(peer, server);
    release!();
    expect(await first).toBeUndefined();
    expect(await second).toBe(1001);
  });

  it('a reader that fails reads as an empty table: the peer is not found, and later lookups still run', async () => {
    let fail = true;
    const lookup = new PeerUidLookup(async (path) => {
      if (fail) throw new Error('EACCES');
      return path.endsWith('6') ? tcp6 : tcp4;
    });
    expect(await lookup.lookup(peer, server)).toBeUndefined();
    fail = false;
    expect(await lookup.lookup(peer, server)).toBe(1001);
  });

  it("names this process's uid for many real connections accepted at once", async () => {
    const accepted: Socket[] = [];
    const srv = createServer((s) => accepted.push(s));
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as AddressInfo).port;
    const clients = await Promise.all(Array.from({ length: 100 }, () => new Promise<Socket>((resolve) => {
      const c = connect(port, '127.0.0.1');
      c.once('connect', () => resolve(c));
    })));
    const lookup = new PeerUidLookup();
    const uids = await Promise.all(clients.map((c) => lookup.lookup({ address: c.localAddress!, port: c.localPort! }, { address: '127.0.0.1', port })));
    expect(new Set(uids)).toEqual(new Set([process.getuid!()]));
    for (const c of clients) c.destroy();
    for (const s of accepted) s.destroy();
    await new Promise((r) => srv.close(r));
  });
});
