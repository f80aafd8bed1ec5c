/**
 * Shared set-up for the suites that run against every sandbox backend (containment) and for the
 * Docker launcher's own suite: which backends are usable here, building each `Launcher` the way
 * the daemon does, scratch directories, a log capture and a `run()` that collects output.
 *
 * Availability: a backend that is not usable skips loudly on a developer machine, and FAILS in
 * CI (`CI=true`), so the containment proof can never silently disappear there.
 */
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { describe, it } from 'vitest';
import { createLogger, type Logger } from '../../../src/log.js';
import { DEFAULT_SANDBOX_LIMITS, type Launcher, type LauncherName, type SandboxExit, type SandboxHandle, type SandboxLimits, type SandboxSpec } from '../../../src/launcher/port.js';
import { createBwrapLauncher } from '../../../src/launcher/bwrap.js';
import { createDockerLauncher, type DockerLauncher } from '../../../src/launcher/docker.js';

export const PROBES_DIR = resolve(import.meta.dirname, '../../fixtures/probes');
export const IS_ROOT = process.getuid?.() === 0;
export const IN_CI = process.env.CI === 'true';
export const BACKENDS: LauncherName[] = ['bwrap', 'docker'];
/** Separates these tests' containers from a daemon's on the same engine (orphan reaping). */
export const TEST_OWNER = 'fusion-e2e';

/** Builds a backend's launcher exactly as the daemon does (src/main.ts factories). */
export function createLauncher(name: LauncherName, log: Logger): Launcher {
  if (name === 'bwrap') return createBwrapLauncher({ log });
  return createDockerLauncher({ log, owner: TEST_OWNER });
}

export function createTestDockerLauncher(log: Logger, extra: { image?: string; socketPath?: string; owner?: string } = {}): DockerLauncher {
  return createDockerLauncher({ log, owner: TEST_OWNER, ...extra });
}

/** Whether each backend is usable here, with the reason when not (asked once per test file). */
export async function backendAvailability(): Promise<Record<LauncherName, { ok: boolean; reason?: string }>> {
  const quiet = createLogger({ level: 'silent' });
  const bwrap = existsSync('/usr/bin/bwrap')
    ? await createBwrapLauncher({ log: quiet }).check()
    : { ok: false, reason: '/usr/bin/bwrap is missing (apt-get install bubblewrap)' };
  const docker = await createDockerLauncher({ log: quiet }).check();
  return { bwrap, docker };
}

/**
 * `describe` that runs when the backend is usable, skips with a warning locally, and fails in CI.
 */
export function describeBackend(name: string, status: { ok: boolean; reason?: string }, body: () => void): void {
  if (status.ok) {
    describe(name, body);
    return;
  }
  const why = `${name}: backend not usable here: ${status.reason ?? 'unknown reason'}`;
  if (IN_CI) {
    describe(name, () => {
      it('is usable in CI (never skipped there)', () => {
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
export async function makeScratch(prefix = 'fusion-e2e-'): Promise<Scratch> {
  const root = await mkdtemp(join(tmpdir(), prefix));
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

/** A fresh out dir below the scratch root (tests that run sandboxes concurrently). */
export async function freshOutDir(scratch: Scratch, name: string): Promise<string> {
  const dir = join(scratch.root, name);
  await mkdir(dir, { mode: 0o700 });
  return dir;
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
export async function run(launcher: Launcher, scratch: Scratch, spec: RunSpec, onStart?: (handle: SandboxHandle) => void): Promise<RunResult> {
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

/** Parses a probe's one JSON line, with the output in the error when it is not JSON. */
export function report<T = Record<string, any>>(result: RunResult): T {
  try {
    return JSON.parse(result.stdout) as T;
  } catch {
    throw new Error(`probe printed no JSON (exit ${JSON.stringify(result.exit)}): stdout=${result.stdout.slice(0, 500)} stderr=${result.stderr.slice(0, 1000)}`);
  }
}
