/**
 * Builds dist/ once before any test: the sandbox child, the stage worker and the daemon
 * processes spawned by integration tests run the compiled JavaScript, never stale output; and the
 * native SO_PEERCRED addon when it is missing.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export default function setup(): void {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  // The SO_PEERCRED addon (make build builds it; a worktree without it gets it here, ~2 s).
  if (!existsSync(join(root, 'native', 'peercred', 'build', 'Release', 'peercred.node'))) {
    execFileSync('bash', [join(root, 'scripts', 'build-native.sh')], { stdio: 'inherit', cwd: root });
  }
  if (process.env.FUSION_TEST_SKIP_BUILD === '1') return;
  execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit', cwd: root });
  // Each vitest project runs the global setup; the first one's build serves them all.
  process.env.FUSION_TEST_SKIP_BUILD = '1';
}
