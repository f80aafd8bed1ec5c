/**
 * Shared by the launcher e2e suites (bwrap, Docker, the containment suite for every backend):
 * scratch directories, the test limits, and a `run()` that launches a probe-capable sandbox and
 * collects its output.
 */
import { chmod, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DEFAULT_SANDBOX_LIMITS, type Launcher, type SandboxExit, type SandboxHandle, type SandboxLimits, type SandboxSpec } from '../../../src/launcher/port.js';

export const PROBES_DIR = resolve(import.meta.dirname, '../../fixtures/probes');
export const IS_ROOT = process.getuid?.() === 0;

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
  // Every sandbox runs as a uid of its own: a file the previous one left in the shared /out is
  // not the next one's to overwrite (as with the workflow's fresh /out per attempt).
  if (spec.outDir === undefined) {
    for (const name of await readdir(scratch.outDir)) await rm(join(scratch.outDir, name), { recursive: true, force: true });
  }
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
