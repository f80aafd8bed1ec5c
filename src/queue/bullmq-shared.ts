/**
 * What the two BullMQ queues (research runs, Fusion tasks) share: the connection settings, the
 * Redis key prefix of a cluster, the start-up check that Redis answers, and the bounded queue
 * add (ioredis would otherwise wait for an unreachable Redis forever).
 */
import type { Queue, Worker } from 'bullmq';
import { FusionError } from '../errors.js';

/** BullMQ's connection for REDIS_URL: workers need maxRetriesPerRequest null. */
export function bullConnection(redisUrl: string): { url: string; maxRetriesPerRequest: null } {
  return { url: redisUrl, maxRetriesPerRequest: null };
}

/**
 * The Redis key prefix of every queue of one cluster: its database's cluster id (migration 6).
 * Daemons sharing a database share their queues; clusters sharing one Redis never take each
 * other's jobs (a job names a row only its own database holds).
 */
export function clusterQueuePrefix(clusterId: string): string {
  return `fusion-${clusterId}`;
}

/** Waits until the queue and worker connected; closes both and throws invalid_config otherwise. */
export async function waitQueueReady(queue: Queue, worker: Worker | undefined, what: string): Promise<void> {
  try {
    await Promise.all([queue.waitUntilReady(), worker?.waitUntilReady()]);
  } catch (err) {
    await Promise.allSettled([worker?.close(true), queue.close()]);
    throw new FusionError('invalid_config', `cannot reach Redis at REDIS_URL for ${what}: ${(err as Error).message}`, { cause: err });
  }
}

/** `add` bounded in time: a queue add that has not answered within `ms` counts as failed. */
export async function addWithin<T>(add: () => Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      add(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`queue add did not answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Job states in which a job will still run (or runs now): the reconcilers add no new job then. */
export const LIVE_JOB_STATES: ReadonlySet<string> = new Set(['waiting', 'active', 'delayed', 'prioritized', 'waiting-children']);
