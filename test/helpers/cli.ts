/**
 * The compiled `fusion` command for tests that drive it as a user would: `runCli` runs it to the
 * end, `spawnCli` starts it (a daemon, a waiting client) with its output piped for
 * `waitForOutput` (test/helpers/wait.ts).
 */
import { spawn, spawnSync, type ChildProcessByStdio } from 'node:child_process';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { DIST } from './gates.js';

export const CLI = join(DIST, 'src', 'cli', 'main.js');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `fusion ARGS` to its exit with `env` over this process's environment. */
export function runCli(args: readonly string[], env: Record<string, string | undefined> = {}, timeoutMs = 60_000, input?: string): CliResult {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: timeoutMs, input });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Starts `fusion ARGS` (or a fixture script with `script`) with stdout and stderr piped. */
export function spawnCli(args: readonly string[], env: Record<string, string | undefined> = {}, script = CLI): ChildProcessByStdio<null, Readable, Readable> {
  return spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
}
