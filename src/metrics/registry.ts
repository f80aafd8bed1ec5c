/**
 * The daemon's Prometheus metrics (prom-client), one registry per process: every instrument is
 * declared here. Only src/instrument.ts (the wrappers and observers the composition root passes
 * down) and the API's scrape (src/api/metrics.ts) use them; `GET /metrics` renders the registry. Gauges that
 * mirror the database (tasks by state) are filled at scrape time by a collector the composition
 * root installs, so they are never stale.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export const registry = new Registry();

export const tasksByState = new Gauge({
  name: 'fusion_tasks',
  help: 'Tasks in the database, by state.',
  labelNames: ['state'] as const,
  registers: [registry],
});

export const stageDuration = new Histogram({
  name: 'fusion_stage_duration_seconds',
  help: 'Wall time of one stage attempt (candidate sandbox, evaluator, repair, merger, replay).',
  labelNames: ['stage', 'outcome'] as const,
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180, 600, 1800, 3000],
  registers: [registry],
});

export const sandboxLaunches = new Counter({
  name: 'fusion_sandbox_launches_total',
  help: 'Sandboxes started, by backend.',
  labelNames: ['backend'] as const,
  registers: [registry],
});

export const sandboxFailures = new Counter({
  name: 'fusion_sandbox_failures_total',
  help: 'Sandboxes that failed to launch or ended abnormally, by backend and reason.',
  labelNames: ['backend', 'reason'] as const,
  registers: [registry],
});

export const egressDecisions = new Counter({
  name: 'fusion_egress_decisions_total',
  help: 'Fetch decisions of the egress guard, by outcome code ("ok" or the typed error code).',
  labelNames: ['code'] as const,
  registers: [registry],
});

export const replayCallsTotal = new Counter({
  name: 'fusion_replay_calls_total',
  help: 'Repository tool calls replayed before evaluation.',
  registers: [registry],
});

export const replayMismatches = new Counter({
  name: 'fusion_replay_mismatches_total',
  help: 'Replayed tool calls whose result differed from what the child logged.',
  registers: [registry],
});

export const replayInconclusive = new Counter({
  name: 'fusion_replay_inconclusive_total',
  help: 'Candidate attempts whose replay was inconclusive: a replayed call differed where a wall-clock limit cut either side (each is retried once).',
  registers: [registry],
});

export const tarballBytes = new Counter({
  name: 'fusion_task_tarball_bytes_total',
  help: 'Bytes of sealed task tarballs written to the database.',
  registers: [registry],
});

export const tarballsSealed = new Counter({
  name: 'fusion_task_tarballs_total',
  help: 'Sealed task tarballs written, by whether they were signed.',
  labelNames: ['signed'] as const,
  registers: [registry],
});

export const maintenanceRuns = new Counter({
  name: 'fusion_maintenance_runs_total',
  help: 'Maintenance job runs, by job and outcome.',
  labelNames: ['job', 'outcome'] as const,
  registers: [registry],
});
