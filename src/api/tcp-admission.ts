/**
 * Which connections the TCP listener keeps (docs/security.md#threat-tcp). Anyone who reaches the
 * port can open connections before any key is checked, so a plain "at most N open" let one peer
 * lock every other client out by holding N connections: silent ones, half-sent requests, or
 * keep-alive connections that send a cheap request every few seconds. The rules:
 *
 * - connections that have not presented a valid key (`unauthenticated`) hold at most
 *   `maxConnections - reservedForAuthenticated` slots, and at most `maxPerAddress` of them per
 *   peer address (IPv6 counted per /64, as the auth throttle counts it); the rest is kept for
 *   keyholders, whose connections no per-address count binds (a keyholder's burst of parallel
 *   requests is served);
 * - a connection with no request in progress for at least `evictGraceMs` (silent since accept,
 *   or idle between keep-alive requests) is the first to go when a newcomer needs its slot: the
 *   longest idle one, an unauthenticated one before an authenticated one;
 * - a newcomer over an unauthenticated bound with nothing to evict may still enter on
 *   probation (at most `maxPerAddress` per address at a time): its first request must arrive
 *   within `probationMs` and must be authenticated, or the connection is closed once that
 *   request is answered;
 * - only when every slot is taken by a connection that is busy or too fresh to evict is a
 *   newcomer refused (busy, Retry-After).
 *
 * A request in progress is never cut here; its own deadlines (headers, whole request) apply.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { throttleKey } from './auth-throttle.js';

export interface TcpAdmissionLimits {
  maxConnections: number;
  maxPerAddress: number;
  reservedForAuthenticated: number;
  probationMs: number;
  evictGraceMs: number;
}

interface Held {
  socket: Socket;
  address: string;
  authenticated: boolean;
  /** Requests being served on this connection right now. */
  busy: number;
  /** Since when nothing has been in progress (accept time for a silent connection). */
  idleSince: number;
  probation: boolean;
  probationTimer?: NodeJS.Timeout;
}

export type Admission = { admitted: true } | { admitted: false; reason: 'address' | 'full'; limit: number };

const authenticated = new WeakSet<Socket>();

/** Marks the connection of `req` as having presented a valid key (called once a key verifies). */
export function markAuthenticated(req: IncomingMessage): void {
  authenticated.add(req.socket);
}

export class TcpAdmission {
  private readonly held = new Map<Socket, Held>();
  /** Unauthenticated connections per address, regular and on probation. */
  private readonly perAddress = new Map<string, { regular: number; probation: number }>();
  private unauthenticated = 0;

  constructor(private readonly limits: TcpAdmissionLimits, private readonly now: () => number = Date.now) {}

  get open(): number {
    return this.held.size;
  }

  /** Decides on a new connection; evicts an idle one when that makes room. */
  admit(socket: Socket): Admission {
    const address = throttleKey(socket.remoteAddress);
    const counts = this.perAddress.get(address) ?? { regular: 0, probation: 0 };
    if (this.held.size >= this.limits.maxConnections && !this.evict(() => true)) {
      return { admitted: false, reason: 'full', limit: this.limits.maxConnections };
    }
    const unauthenticatedShare = this.limits.maxConnections - this.limits.reservedForAuthenticated;
    let probation = false;
    if (counts.regular >= this.limits.maxPerAddress && !this.evict((h) => !h.authenticated && !h.probation && h.address === address)) probation = true;
    else if (this.unauthenticated >= unauthenticatedShare && !this.evict((h) => !h.authenticated)) probation = true;
    if (probation && counts.probation >= this.limits.maxPerAddress) return { admitted: false, reason: 'address', limit: this.limits.maxPerAddress };
    this.add(socket, address, probation);
    return { admitted: true };
  }

  /** Counts a request in progress on its connection until its reply is done. */
  onRequest(req: IncomingMessage, res: ServerResponse): void {
    const h = this.held.get(req.socket);
    if (h === undefined) return;
    h.busy += 1;
    if (h.probationTimer !== undefined) {
      clearTimeout(h.probationTimer);
      h.probationTimer = undefined;
    }
    res.once('close', () => {
      this.refresh(h);
      h.busy = Math.max(0, h.busy - 1);
      h.idleSince = this.now();
      // A connection admitted on probation keeps its slot only with a valid key.
      if (h.probation && !h.authenticated) h.socket.destroy();
    });
  }

  private add(socket: Socket, address: string, probation: boolean): void {
    const h: Held = { socket, address, authenticated: false, busy: 0, idleSince: this.now(), probation };
    this.held.set(socket, h);
    this.count(h, 1);
    if (probation) {
      h.probationTimer = setTimeout(() => socket.destroy(), this.limits.probationMs);
      h.probationTimer.unref();
    }
    socket.once('close', () => this.remove(h));
  }

  /** Adds `delta` to the unauthenticated counts of `h` (an authenticated connection counts nowhere). */
  private count(h: Held, delta: 1 | -1): void {
    if (h.authenticated) return;
    this.unauthenticated += delta;
    const counts = this.perAddress.get(h.address) ?? { regular: 0, probation: 0 };
    if (h.probation) counts.probation += delta;
    else counts.regular += delta;
    if (counts.regular <= 0 && counts.probation <= 0) this.perAddress.delete(h.address);
    else this.perAddress.set(h.address, counts);
  }

  private remove(h: Held): void {
    if (this.held.get(h.socket) !== h) return;
    this.held.delete(h.socket);
    if (h.probationTimer !== undefined) clearTimeout(h.probationTimer);
    this.count(h, -1);
  }

  /** Moves a connection whose key verified out of the unauthenticated counts. */
  private refresh(h: Held): void {
    if (h.authenticated || !authenticated.has(h.socket) || this.held.get(h.socket) !== h) return;
    this.count(h, -1);
    h.authenticated = true;
    h.probation = false;
  }

  /**
   * Closes the longest-idle connection matching `which` (unauthenticated ones first); false when
   * every matching connection has a request in progress or went idle too recently (a client
   * that has just connected is still sending its request). The slot is freed at once.
   */
  private evict(which: (h: Held) => boolean): boolean {
    const idleBefore = this.now() - this.limits.evictGraceMs;
    let victim: Held | undefined;
    for (const h of this.held.values()) {
      this.refresh(h);
      if (h.busy > 0 || h.idleSince > idleBefore || !which(h)) continue;
      if (victim === undefined || (victim.authenticated && !h.authenticated) || (victim.authenticated === h.authenticated && h.idleSince < victim.idleSince)) victim = h;
    }
    if (victim === undefined) return false;
    this.remove(victim);
    victim.socket.destroy();
    return true;
  }
}
