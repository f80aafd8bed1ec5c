/**
 * Shared set-up for the workflow e2e suites: a real daemon (in-process, real
 * socket, real SQLite, real bwrap sandboxes, real stage worker threads) over the fixture
 * repository `test/fixtures/e2e/repo`, with test-only seams:
 *   - providers that wrap the builtin engine (capture, slow, crash, oversized, fenced JSON);
 *   - a launcher that wraps the real bwrap launcher (records every sandbox, can tamper with
 *     the attempt's files after the sandbox exits and before the supervisor collects them);
 *   - a /proc scanner to prove no sandbox process outlives its task.
 *
 * The daemon code is the TypeScript source (for types); the sandbox child and the stage worker
 * run the compiled tree in dist/ (built by test/global-setup.ts), bound at /opt/fusion.
 */
import { DEFAULT_SANDBOX_UIDS } from '../../../src/launcher/uid-pool.js';
import { cpSync, chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { buildConfig, startDaemon, type Daemon, type DaemonOverrides } from '../../../src/main.js';
import type { Logger } from '../../../src/log.js';
import { createBwrapLauncher } from '../../../src/launcher/bwrap.js';
import type { Launcher, SandboxExit, SandboxHandle, SandboxSpec } from '../../../src/launcher/port.js';
import { createBuiltinProvider, type BuiltinStrategy } from '../../../src/models/builtin/index.js';
import type { ModelProvider, ModelRequest, ModelResponse } from '../../../src/models/port.js';
import { fixedRoster, type Roster } from '../../../src/models/roster.js';
import { startStageScheduler, type StageWorkers } from '../../../src/workflow/stage-workers.js';
import type { WorkflowDeps } from '../../../src/workflow/stage-context.js';
import { FusionClient } from '../../../src/client/index.js';
import { captureLogs as captureSharedLogs, type LogCapture } from '../shared/logs.js';

export const ROOT = resolve(import.meta.dirname, '..', '..', '..');
export const DIST = join(ROOT, 'dist');
export const BWRAP_PATH = '/usr/bin/bwrap';
export const FIXTURE_REPO = join(ROOT, 'test', 'fixtures', 'e2e', 'repo');
/** Whether `uid` is one a sandbox may run as: under root a leased uid of the default range, else our own. */
export function isSandboxUid(uid: number): boolean {
  if (process.getuid?.() !== 0) return uid === process.getuid?.();
  return uid >= DEFAULT_SANDBOX_UIDS.start && uid <= DEFAULT_SANDBOX_UIDS.end;
}

/** The request every suite asks about the fixture (a token-bucket rate limiter). */
export const REFILL_ARGS = {
  objective: 'Find where the token bucket refills tokens and how the refill rate is applied',
  background: ['Clients report that /login allows bursts after a pause'],
  deliverable: 'The file and lines that implement the refill',
};
export const RIGHT_FILE = 'src/token-bucket.js';

/** Runs when bwrap exists. Locally a missing bwrap skips loudly; in CI it fails. */
export { describeWithBwrap } from '../../helpers/gates.js';

// ---------------------------------------------------------------------------------------------
// Fixture repository and scratch directories

/** A world-readable copy of the fixture repo (the sandbox uid must read it; mkdtemp is 0700). */
export function copyFixtureRepo(): { root: string; repo: string } {
  const root = mkdtempSync(join(tmpdir(), 'fusion-e2e-repo-'));
  const repo = join(root, 'repo');
  cpSync(FIXTURE_REPO, repo, { recursive: true });
  chmodSync(root, 0o755);
  const walk = (dir: string): void => {
    chmodSync(dir, 0o755);
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else chmodSync(p, 0o644);
    }
  };
  walk(repo);
  return { root, repo };
}

/** A run root path that does not exist yet (the workflow creates it 0711), short for socket paths. */
export function freshRunRoot(): string {
  return join(tmpdir(), `fsn-e2e-${randomBytes(4).toString('hex')}`);
}

// ---------------------------------------------------------------------------------------------
// Providers (test-only wrappers around the builtin engine)

export const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolveSleep, reject) => {
    if (signal?.aborted) return reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolveSleep();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new Error('aborted'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });

export type CompleteFn = (req: ModelRequest, inner: ModelProvider) => Promise<ModelResponse>;

/** A provider with the inner provider's id/engine whose `complete` is replaced by `fn`. */
export function wrapProvider(inner: ModelProvider, fn: CompleteFn): ModelProvider {
  return { id: inner.id, engine: inner.engine, complete: (req) => fn(req, inner) };
}

export function builtin(strategy: BuiltinStrategy = 'content-search'): ModelProvider {
  return createBuiltinProvider(strategy);
}

export interface RosterParts {
  candidates?: Partial<Record<1 | 2 | 3, ModelProvider>>;
  evaluator?: ModelProvider;
  merger?: ModelProvider;
}

/** The default builtin roster (main.ts defaultRoster) with some providers replaced. */
export function builtinRoster(parts: RosterParts = {}): Roster {
  return fixedRoster(
    [
      parts.candidates?.[1] ?? builtin('content-search'),
      parts.candidates?.[2] ?? builtin('path-search'),
      parts.candidates?.[3] ?? builtin('definition-search'),
    ],
    parts.evaluator ?? builtin('content-search'),
    parts.merger ?? builtin('content-search'),
  );
}

/** Resolves once `count` marks were made; `mark()` is called by providers. */
export function latch(count: number): { mark: () => void; done: Promise<void>; readonly marks: number } {
  let marks = 0;
  let release!: () => void;
  const done = new Promise<void>((r) => (release = r));
  return {
    mark: () => {
      marks += 1;
      if (marks >= count) release();
    },
    done,
    get marks() {
      return marks;
    },
  };
}

/** Candidate provider that sleeps (abortably) before its first answer, then acts as the builtin. */
export function slowCandidate(strategy: BuiltinStrategy, ms: number, entered?: () => void): ModelProvider {
  return wrapProvider(builtin(strategy), async (req, inner) => {
    if (req.role === 'candidate') {
      entered?.();
      await sleep(ms, req.signal);
    }
    return inner.complete(req);
  });
}

// ---------------------------------------------------------------------------------------------
// Launcher seam

export interface LaunchRecord {
  label: string;
  taskId: string;
  spec: SandboxSpec;
  /** Host pid of bwrap. */
  pid: number | undefined;
  launchedAt: number;
  exit?: SandboxExit;
}

export interface LauncherHooks {
  /** May replace the spec before launch (e.g. give a replay sandbox another repository). */
  beforeLaunch?: (spec: SandboxSpec) => SandboxSpec;
  /** Runs after the sandbox exited and before the supervisor sees the exit (tamper seam). */
  afterExit?: (spec: SandboxSpec, exit: SandboxExit) => void | Promise<void>;
}

/** The real bwrap launcher, wrapped: records every sandbox; optional after-exit hook. */
export function trackingLauncher(log: Logger, records: LaunchRecord[], hooks: LauncherHooks = {}): Launcher {
  const inner = createBwrapLauncher({ log });
  return {
    name: inner.name,
    check: () => inner.check(),
    async launch(original) {
      const spec = hooks.beforeLaunch?.(original) ?? original;
      const handle = await inner.launch(spec);
      const record: LaunchRecord = { label: spec.label, taskId: spec.taskId, spec, pid: handle.pid, launchedAt: Date.now() };
      records.push(record);
      const exit = handle.exit.then(async (e) => {
        record.exit = e;
        await hooks.afterExit?.(spec, e);
        return e;
      });
      const wrapped: SandboxHandle = {
        get pid() {
          return handle.pid;
        },
        exit,
        markActivity: () => handle.markActivity(),
        kill: (reason) => handle.kill(reason),
      };
      return wrapped;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// In-process daemon

export type { LogCapture } from '../shared/logs.js';

/** The shared log capture at the level FUSION_E2E_LOG asks for (default info). */
export function captureLogs(): LogCapture {
  return captureSharedLogs(process.env.FUSION_E2E_LOG ?? 'info');
}

export interface E2EDaemon {
  daemon: Daemon;
  client: FusionClient;
  home: string;
  runRoot: string;
  repo: string;
  launches: LaunchRecord[];
  logs: LogCapture;
  submit(args?: unknown, repo?: string): Promise<{ taskId: string } & Record<string, unknown>>;
  /** Long-polls until the task is terminal; returns the task view. */
  waitTerminal(taskId: string, timeoutMs?: number): Promise<Record<string, any>>;
  close(): Promise<void>;
}

export interface E2EOptions {
  roster?: Roster;
  hooks?: LauncherHooks;
  workflow?: Partial<WorkflowDeps>;
  /** Runs on the fresh data directory before the daemon starts (e.g. to create a signing key). */
  prepareHome?: (home: string) => void;
  /** Maintenance settings (short schedules in tests). */
  maintenance?: DaemonOverrides['maintenance'];
  /**
   * Keep attempt files after sealing (the admin opt-in). Default true here: most of these tests
   * read an ended task's attempt files; the audit test runs with the product default (false).
   */
  keepAttemptFiles?: boolean;
  /**
   * An existing data directory and repository copy (a restart on the same ones): used as they
   * are, and left in place by close().
   */
  reuse?: { home: string; repo: string };
}

export async function startE2EDaemon(options: E2EOptions = {}): Promise<E2EDaemon> {
  const home = options.reuse?.home ?? mkdtempSync(join(tmpdir(), 'fusion-e2e-home-'));
  options.prepareHome?.(home);
  const fixture = options.reuse !== undefined ? { root: undefined, repo: options.reuse.repo } : copyFixtureRepo();
  const runRoot = freshRunRoot();
  const logs = captureLogs();
  const launches: LaunchRecord[] = [];
  // The stage worker runs the compiled job (dist/), like the sandbox child.
  const stageWorkers: StageWorkers = await startStageScheduler({ jobFile: join(DIST, 'jobs', 'stage-worker.js'), log: logs.log });
  const config = buildConfig({ home, socketPath: join(home, 'fusion.sock'), logLevel: 'info', sandbox: 'bwrap', keepAttemptFiles: options.keepAttemptFiles ?? true });
  let daemon: Daemon;
  try {
    daemon = await startDaemon(config, {
      log: logs.log,
      roster: options.roster ?? builtinRoster(),
      launcherFactories: { bwrap: () => trackingLauncher(logs.log, launches, options.hooks) },
      ...(options.maintenance ? { maintenance: options.maintenance } : {}),
      workflow: {
        codeDir: DIST,
        stageJobFile: join(DIST, 'jobs', 'stage-worker.js'),
        stageWorkers,
        runRoot,
        ...options.workflow,
      },
    });
  } catch (err) {
    // A refused start-up leaves no worker threads behind.
    await stageWorkers.stop();
    rmSync(runRoot, { recursive: true, force: true });
    throw err;
  }
  const client = new FusionClient(daemon.socketPath);
  return {
    daemon,
    client,
    home,
    runRoot,
    repo: fixture.repo,
    launches,
    logs,
    submit: async (args = REFILL_ARGS, repo = fixture.repo) => (await client.call('POST', '/v1/tasks/investigate', { arguments: args, repo })) as { taskId: string },
    waitTerminal: async (taskId, timeoutMs = 90_000) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`task ${taskId} did not reach a terminal state in ${timeoutMs} ms`);
        const reply = (await client.call('GET', `/v1/tasks/${taskId}/wait?timeoutMs=${Math.min(left, 30_000)}`)) as { terminal: boolean; task: Record<string, any> };
        if (reply.terminal) return reply.task;
      }
    },
    close: async () => {
      await daemon.close();
      await stageWorkers.stop();
      if (options.reuse === undefined) rmSync(home, { recursive: true, force: true });
      if (fixture.root !== undefined) rmSync(fixture.root, { recursive: true, force: true });
      rmSync(runRoot, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Processes

export interface ProcInfo {
  pid: number;
  comm: string;
  ppid: number;
  state: string;
  /** Start time in clock ticks since boot (pid + starttime identifies a process). */
  startTime: string;
  uid: number;
}

export function readProc(pid: number): ProcInfo | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1] ?? -1);
    return { pid, comm, ppid: Number(rest[1]), state: rest[0]!, startTime: rest[19]!, uid };
  } catch {
    return undefined;
  }
}

export function procTable(): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const info = readProc(Number(name));
    if (info) out.push(info);
  }
  return out;
}

/** Every live process at or below the given roots (one snapshot of /proc). */
export function treeOf(roots: Iterable<number>): ProcInfo[] {
  const table = procTable();
  const children = new Map<number, ProcInfo[]>();
  for (const p of table) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p]);
  const out: ProcInfo[] = [];
  const queue = [...roots].map((pid) => table.find((p) => p.pid === pid)).filter((p): p is ProcInfo => p !== undefined);
  while (queue.length > 0) {
    const p = queue.shift()!;
    out.push(p);
    queue.push(...(children.get(p.pid) ?? []));
  }
  return out;
}

/** Processes of a snapshot that still run (same pid and start time, not a zombie). */
export function stillAlive(snapshot: ProcInfo[]): ProcInfo[] {
  return snapshot.filter((p) => {
    const now = readProc(p.pid);
    return now !== undefined && now.startTime === p.startTime && now.state !== 'Z' && now.state !== 'X';
  });
}

/** Live sandbox processes below this test process: every bwrap and everything under it. */
export function ourSandboxProcesses(): ProcInfo[] {
  const bwraps = treeOf([process.pid]).filter((p) => p.comm === 'bwrap' && p.state !== 'Z');
  return treeOf(bwraps.map((p) => p.pid)).filter((p) => p.state !== 'Z' && p.state !== 'X');
}

export { waitFor } from '../../helpers/wait.js';

// ---------------------------------------------------------------------------------------------
// Answers

export interface CitedLine {
  path: string;
  line: number;
  quote: string | undefined;
}

/** `path:line` citations in the candidateSystemPrompt format, each with its quoted line when present. */
export function citationsOf(answer: string): CitedLine[] {
  const lines = answer.split('\n');
  const out: CitedLine[] = [];
  lines.forEach((text, i) => {
    const m = /`([A-Za-z0-9_./-]+\.[A-Za-z0-9]+):(\d+)`/.exec(text);
    if (!m) return;
    const next = lines[i + 1]?.trim() ?? '';
    let quote: string | undefined;
    const dbl = /^> `` (.*) ``$/.exec(next);
    const single = /^> `(.*)`$/.exec(next);
    if (dbl) quote = dbl[1];
    else if (single) quote = single[1];
    out.push({ path: m[1]!, line: Number(m[2]), quote });
  });
  return out;
}

export const collapse = (s: string): string => s.replace(/\s+/g, ' ').trim();

export function listAttemptDirs(home: string, taskId: string): string[] {
  const dir = join(home, 'tasks', taskId, 'attempts');
  return existsSync(dir) ? readdirSync(dir).sort() : [];
}
