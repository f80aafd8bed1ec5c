/**
 * `GET /metrics` (Prometheus text, rendered by prom-client) and the extra facts of
 * `GET /v1/health`. The task gauge is refreshed from the database at scrape time.
 */
import { TASK_STATES } from '../contracts/task-state.js';
import type { Store } from '../store/port.js';
import { registry, tasksByState } from '../metrics/registry.js';

export function createMetricsEndpoint(store: Store): () => Promise<{ contentType: string; body: string }> {
  return async () => {
    const counts = await store.countTasksByState();
    // Every state gets a sample (0 included), so a dashboard sees a state drain to zero.
    for (const state of TASK_STATES) tasksByState.set({ state }, counts[state] ?? 0);
    return { contentType: registry.contentType, body: await registry.metrics() };
  };
}

export interface HealthSources {
  /** Database facts (file, journal mode, schema version); throws when the database is unusable. */
  database(): Promise<Record<string, unknown>>;
  /** The configured model roster (providers and models, never a key). */
  providers(): unknown;
  /** Tasks waiting for a run slot and tasks running. */
  queue(): { queued: number; running: number };
  /** The docker child image name when Docker is the backend. */
  image(backend: string | undefined): string | null;
  /** The sandbox backend `auto` resolves to now. */
  sandboxBackend(): Promise<string | undefined>;
}

export function createHealthFacts(sources: HealthSources): () => Promise<Record<string, unknown>> {
  return async () => {
    let database: Record<string, unknown>;
    try {
      database = { ok: true, ...(await sources.database()) };
    } catch (err) {
      database = { ok: false, reason: err instanceof Error ? err.message : String(err) };
    }
    const backend = await sources.sandboxBackend();
    const queue = sources.queue();
    return {
      database,
      sandboxImage: sources.image(backend),
      providers: sources.providers(),
      queue: { depth: queue.queued, queued: queue.queued, running: queue.running },
    };
  };
}
