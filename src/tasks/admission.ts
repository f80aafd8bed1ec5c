/**
 * Admission (docs/behaviour.md#b2): the bound on tasks waiting for a run slot, for the daemon
 * and per caller, and the Retry-After of a busy refusal (from the mean wall time of recent runs).
 */
import { FusionError } from '../errors.js';

export interface AdmissionLimits {
  maxQueued: number;
  maxQueuedPerCaller: number;
  concurrency: number;
}

export class Admission {
  /** Tasks admitted but not started yet, per caller (reserved synchronously, so a flood cannot overshoot). */
  private readonly waiting = new Map<string, number>();
  private waitingTotal = 0;
  /** Mean wall time of recent runs (for Retry-After), exponentially weighted. */
  private meanRunMs = 30_000;

  /** `limits` absent: unbounded. */
  constructor(private readonly limits: AdmissionLimits | undefined) {}

  /** Reserves a waiting place for `caller`, or refuses with busy (HTTP 429, Retry-After); returns its release (idempotent). */
  admit(caller: string): () => void {
    const refusal = this.refusal(caller);
    if (refusal !== undefined) throw refusal;
    this.waiting.set(caller, (this.waiting.get(caller) ?? 0) + 1);
    this.waitingTotal++;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.waitingTotal--;
      const left = (this.waiting.get(caller) ?? 1) - 1;
      if (left <= 0) this.waiting.delete(caller);
      else this.waiting.set(caller, left);
    };
  }

  /** The busy answer for `caller` now (the daemon's or its own waiting bound reached), else undefined. */
  refusal(caller: string): FusionError | undefined {
    const limits = this.limits;
    if (limits === undefined) return undefined;
    const mine = this.waiting.get(caller) ?? 0;
    const whose = this.waitingTotal >= limits.maxQueued ? 'the daemon' : mine >= limits.maxQueuedPerCaller ? `caller ${JSON.stringify(caller)}` : undefined;
    if (whose === undefined) return undefined;
    const limit = whose === 'the daemon' ? limits.maxQueued : limits.maxQueuedPerCaller;
    const waiting = whose === 'the daemon' ? this.waitingTotal : mine;
    const retryAfterSeconds = Math.max(1, Math.ceil(((this.meanRunMs / 1000) * Math.max(1, waiting)) / Math.max(1, limits.concurrency) / 4));
    return new FusionError('busy', `the daemon is busy: ${waiting} tasks of ${whose} are already waiting (limit ${limit}); nothing was created. Retry in about ${retryAfterSeconds} s.`, {
      details: { waiting, limit, scope: whose === 'the daemon' ? 'daemon' : 'caller', retryAfterSeconds },
    });
  }

  /** Whether a new task must wait for a run slot (it is then marked queued). */
  mustWait(running: number, queued: number): boolean {
    return this.limits !== undefined && running + queued >= this.limits.concurrency;
  }

  /** A run ended after `ms`: feeds the Retry-After estimate. */
  ranFor(ms: number): void {
    this.meanRunMs = 0.8 * this.meanRunMs + 0.2 * ms;
  }

  /** Tasks waiting for a run slot now (health, metrics). */
  get waitingCount(): number {
    return this.waitingTotal;
  }
}
