/**
 * Builds dist/ once before any test: the sandbox child, the Bree stage worker and the daemon
 * processes spawned by integration tests run the compiled JavaScript, never stale output.
 */
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export default function setup(): void {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  if (process.env.FUSION_TEST_SKIP_BUILD === '1') return;
  execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit', cwd: root });
}
