/**
 * Metrics by wrapping the ports the composition root already builds (launchers, stage workers,
 * the research fetcher), and the observers it passes to the audit (replay, task tarballs), so
 * no module but this one and the API's scrape imports an instrument of src/metrics/registry.ts.
 */
import { toFusionError } from './errors.js';
import type { Launcher } from './launcher/port.js';
import type { StageWorkers } from './workflow/stage-workers.js';
import type { Fetcher } from './workflow/stage-context.js';
import type { ReplayMetrics } from './audit/replay.js';
import { egressDecisions, replayCallsTotal, replayInconclusive, replayMismatches, sandboxFailures, sandboxLaunches, stageDuration, tarballBytes, tarballsSealed, maintenanceRuns } from './metrics/registry.js';

/** `candidate-1.attempt-2` → `candidate`; `candidate-1.attempt-2.replay` → `replay`. */
function stageOf(label: string): string {
  if (label.endsWith('.replay')) return 'replay_sandbox';
  return label.replace(/\.attempt-\d+$/, '').replace(/-\d+$/, '');
}

export function instrumentLauncher(launcher: Launcher): Launcher {
  return {
    name: launcher.name,
    check: () => launcher.check(),
    async launch(spec) {
      // The replay verifier counts its own launches.
      const replay = spec.label.endsWith('.replay');
      if (!replay) sandboxLaunches.inc({ backend: launcher.name });
      let handle;
      try {
        handle = await launcher.launch(spec);
      } catch (err) {
        sandboxFailures.inc({ backend: launcher.name, reason: toFusionError(err).code });
        throw err;
      }
      void handle.exit.then((exit) => {
        const abnormal = exit.reason !== 'exited' || exit.exitCode !== 0;
        if (abnormal && !replay) sandboxFailures.inc({ backend: launcher.name, reason: exit.reason === 'exited' ? 'exit_nonzero' : exit.reason });
        stageDuration.observe({ stage: stageOf(spec.label), outcome: abnormal ? 'failed' : 'ok' }, exit.durationMs / 1000);
      }, () => undefined);
      return handle;
    },
  };
}

export function instrumentStageWorkers(workers: StageWorkers): StageWorkers {
  return {
    stop: () => workers.stop(),
    async run(spec) {
      const exit = await workers.run(spec);
      // Job names are `<taskId>:<stage>:<attempt>`.
      const stage = spec.name.split(':').at(-2) ?? 'stage';
      stageDuration.observe({ stage, outcome: exit.reason === 'exited' ? 'ok' : exit.reason }, exit.durationMs / 1000);
      return exit;
    },
  };
}

export function instrumentFetcher(fetcher: Fetcher): Fetcher {
  return async (req, signal) => {
    const res = await fetcher(req, signal);
    egressDecisions.inc({ code: res.ok ? 'ok' : res.error.code });
    return res;
  };
}

/** The replay verifier's launches, failures, replayed calls, mismatches and inconclusive comparisons. */
export const replayMetrics: ReplayMetrics = {
  launched: (backend) => sandboxLaunches.inc({ backend }),
  failed: (backend, reason) => sandboxFailures.inc({ backend, reason }),
  replayed: (calls, seconds) => {
    replayCallsTotal.inc(calls);
    stageDuration.observe({ stage: 'replay', outcome: 'ok' }, seconds);
  },
  mismatched: () => replayMismatches.inc(),
  inconclusive: () => replayInconclusive.inc(),
};

/** One sealed task tarball: its bytes, and whether it was signed. */
export function countSealedTarball(sealed: { bytes: number; signed: boolean }): void {
  tarballBytes.inc(sealed.bytes);
  tarballsSealed.inc({ signed: sealed.signed ? 'true' : 'false' });
}

/** One maintenance job run, by job and outcome. */
export function countMaintenanceRun(job: string, outcome: 'ok' | 'failed'): void {
  maintenanceRuns.inc({ job, outcome });
}
