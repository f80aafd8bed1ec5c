/**
 * Shared set-up for the bwrap e2e suites: skip rules, scratch directories, a log capture and a
 * `run()` that collects a sandbox's output.
 */
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { describe, it } from 'vitest';
import { createLogger, type Logger } from '../../../src/log.js';
import { DEFAULT_SANDBOX_LIMITS, type SandboxExit, type SandboxLimits, type SandboxSpec } from '../../../src/launcher/port.js';
import type { BwrapLauncher } from '../../../src/launcher/bwrap.js';

export const BWRAP_PATH = '/usr/bin/bwrap';
export const PROBES_DIR = resolve(import.meta.dirname, '../../fixtures/probes');
export const IS_ROOT = process.getuid?.() === 0;

/**
 * Runs the suite when bwrap exists. Locally a missing bwrap skips loudly; in CI
 * (`CI=true`) it fails, so the containment proof can never silently disappear.
 */
export function describeWithBwrap(name: string, body: () => void): void {
  if (existsSync(BWRAP_PATH)) {
    describe(name, body);
    return;
  }
  const why = `${BWRAP_PATH} is missing: the bwrap containment suite cannot run (apt-get install bubblewrap)`;
  if (process.env.CI === 'true') {
    describe(name, () => {
      it('needs bubblewrap in CI', () => {
        throw new Error(why);
      });
    });
    return;
  }
  console.warn(`\n!!! SKIPPING "${name}": ${why}\n`);
  describe.skip(name, body);
}

export interface Scratch {
  root: string;
  repoDir: string;
  outDir: string;
  cleanup(): Promise<void>;
}

/** A repository (world-readable, as the sandbox uid must read it) and an empty out dir. */
export async function makeScratch(): Promise<Scratch> {
  const root = await mkdtemp(join(tmpdir(), 'fusion-bwrap-'));
  await chmod(root, 0o755);
  const repoDir = join(root, 'repo');
  const outDir = join(root, 'out');
  await mkdir(join(repoDir, 'src'), { recursive: true, mode: 0o755 });
  await chmod(repoDir, 0o755);
  await writeFile(join(repoDir, 'README.md'), '# fixture repo\n', { mode: 0o644 });
  await writeFile(join(repoDir, 'src', 'main.ts'), 'export const answer = 42;\n', { mode: 0o644 });
  await mkdir(outDir, { mode: 0o700 });
  return { root, repoDir, outDir, cleanup: () => rm(root, { recursive: true, force: true }) };
}

export interface LogCapture {
  log: Logger;
  lines: () => Array<Record<string, unknown>>;
}

export function captureLogs(): LogCapture {
  const raw: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      raw.push(...chunk.toString('utf8').split('\n').filter((l) => l !== ''));
      callback();
    },
  });
  return {
    log: createLogger({ level: 'debug', destination }),
    lines: () => raw.map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

export function limits(overrides: Partial<SandboxLimits> = {}): SandboxLimits {
  return { ...DEFAULT_SANDBOX_LIMITS, wallMs: 60_000, idleMs: 60_000, ...overrides };
}

export interface RunResult {
  exit: SandboxExit;
  stdout: string;
  stderr: string;
}

export type RunSpec = Partial<SandboxSpec> & Pick<SandboxSpec, 'command'>;

/** Launches a probe-capable sandbox (probes at /opt/fusion) and waits for its exit. */
export async function run(launcher: BwrapLauncher, scratch: Scratch, spec: RunSpec, onStart?: (handle: Awaited<ReturnType<BwrapLauncher['launch']>>) => void): Promise<RunResult> {
  let stdout = '';
  let stderr = '';
  const handle = await launcher.launch({
    taskId: 'task-e2e',
    label: 'probe',
    repoDir: scratch.repoDir,
    outDir: scratch.outDir,
    codeDir: PROBES_DIR,
    limits: limits(),
    onStdout: (chunk) => {
      stdout += chunk.toString('utf8');
    },
    onStderr: (chunk) => {
      stderr += chunk.toString('utf8');
    },
    ...spec,
  });
  onStart?.(handle);
  const exit = await handle.exit;
  return { exit, stdout, stderr };
}

/** `node /opt/fusion/<probe> args…` as the sandbox command. */
export function probe(name: string, ...args: string[]): string[] {
  return ['node', `/opt/fusion/${name}`, ...args];
}
