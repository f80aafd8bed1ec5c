/**
 * Shared set-up for the bwrap e2e suites: the skip rule here; scratch directories, the log capture
 * and `run()` come from test/e2e/shared/.
 */
import { describeWithBwrap as describeWithBwrapGate } from '../../helpers/gates.js';

export { captureLogs, type LogCapture } from '../shared/logs.js';
export { IS_ROOT, limits, makeScratch, PROBES_DIR, probe, run, type RunResult, type RunSpec, type Scratch } from '../shared/sandbox.js';

export const BWRAP_PATH = '/usr/bin/bwrap';

/**
 * Runs the suite when bwrap exists. Locally a missing bwrap skips loudly; in CI
 * (`CI=true`) it fails, so the containment proof can never silently disappear.
 */
export function describeWithBwrap(name: string, body: () => void): void {
  describeWithBwrapGate(name, body, { bwrap: true });
}
