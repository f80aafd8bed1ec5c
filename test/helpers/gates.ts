/**
 * Prerequisite gates for suites that need the host (bwrap, root, a built dist/): a suite whose
 * prerequisite is missing skips LOUDLY on a developer machine and FAILS under CI=true, so a proof
 * can never silently disappear from CI (docs/architecture.md#tests).
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, it } from 'vitest';

export const ROOT = resolve(import.meta.dirname, '..', '..');
export const DIST = join(ROOT, 'dist');
export const BWRAP_PATH = '/usr/bin/bwrap';
export const IS_ROOT = process.getuid?.() === 0;
export const IN_CI = process.env.CI === 'true';

export interface Needs {
  /** Root (user accounts, setpriv, mounts). */
  root?: boolean;
  /** bubblewrap at BWRAP_PATH. */
  bwrap?: boolean;
  /** The compiled tree with the sandbox child (the global setup builds it). */
  dist?: boolean;
}

/** Why the suite cannot run here, or undefined when everything it needs is present. */
export function missingPrerequisite(needs: Needs): string | undefined {
  if (needs.root === true && !IS_ROOT) return 'it needs root';
  if (needs.bwrap === true && !existsSync(BWRAP_PATH)) return `${BWRAP_PATH} is missing (apt-get install bubblewrap)`;
  if (needs.dist === true && !existsSync(join(DIST, 'sandbox', 'child-main.js'))) return 'dist/ is not built (npx tsc -p tsconfig.build.json)';
  return undefined;
}

/** `describe` when `missing` is undefined; otherwise a loud skip, or under CI a failing test. */
export function describeUnless(missing: string | undefined, name: string, body: () => void): void {
  if (missing === undefined) {
    describe(name, body);
    return;
  }
  if (IN_CI) {
    describe(name, () => {
      it('needs its prerequisites in CI', () => {
        throw new Error(missing);
      });
    });
    return;
  }
  console.warn(`\n!!! SKIPPING "${name}": ${missing}\n`);
  describe.skip(name, body);
}

/** The suite runs where `needs` are met (bwrap and a built dist/ by default). */
export function describeWithBwrap(name: string, body: () => void, needs: Needs = { bwrap: true, dist: true }): void {
  describeUnless(missingPrerequisite(needs), name, body);
}
