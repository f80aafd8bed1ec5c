/**
 * The `Launcher` port: the host side of isolation. One implementation per backend
 * (`bwrap.ts`, `docker.ts`), both supervised by `supervise.ts`; the workflow only sees this interface.
 *
 * Paths inside every sandbox are fixed so the child code never needs configuration:
 *   /repo                      the repository, read-only
 *   /out                       the attempt's writable output directory
 *   /opt/fusion                the built child code, read-only
 *   /run/fusion/broker.sock    the broker socket (the child's only channel out)
 *   /run/fusion/request.json   the child's request, read-only
 *   /tmp                       tmpfs with a size cap
 */

export const SANDBOX_PATHS = {
  repo: '/repo',
  out: '/out',
  code: '/opt/fusion',
  brokerSocket: '/run/fusion/broker.sock',
  request: '/run/fusion/request.json',
  tmp: '/tmp',
} as const;

export type LauncherName = 'bwrap' | 'docker' | 'gvisor';

export interface SandboxLimits {
  wallMs: number;
  /** Killed when neither output nor `markActivity()` was seen for this long. */
  idleMs: number;
  maxStdoutBytes: number;
  maxStderrBytes: number;
  memoryBytes: number;
  maxProcesses: number;
  tmpfsBytes: number;
  /** SIGTERM first, then SIGKILL after this grace. */
  killGraceMs: number;
  /** Entries (at any depth) /out may hold while the sandbox runs (default `MAX_OUT_FILES`). */
  maxOutFiles?: number;
  /** Bytes (over the whole tree) /out may hold while the sandbox runs (default `MAX_OUT_BYTES`). */
  maxOutBytes?: number;
}

export interface SandboxSpec {
  /** For log lines and labels only. */
  taskId: string;
  /** e.g. `candidate-1.attempt-1`. */
  label: string;
  /** Host directory bound read-only at /repo. */
  repoDir: string;
  /** Host directory bound writable at /out; must exist. The launcher makes it writable by the sandbox uid. */
  outDir: string;
  /** Host directory bound read-only at /opt/fusion (the built child code). Optional for `sandbox exec`. */
  codeDir?: string;
  /** Host path of the broker socket, bound at /run/fusion/broker.sock. */
  brokerSocketPath?: string;
  /** Host file bound read-only at /run/fusion/request.json. */
  requestFile?: string;
  /** argv inside the sandbox; argv[0] is resolved on the sandbox PATH (node is at /usr/local/bin/node or bound). */
  command: string[];
  /** The complete environment inside the sandbox; the daemon's environment never leaks in. */
  env?: Record<string, string>;
  limits: SandboxLimits;
  signal?: AbortSignal;
  onStdout?: (chunk: Buffer) => void;
  onStderr?: (chunk: Buffer) => void;
}

export type SandboxExitReason = 'exited' | 'signaled' | 'wall_timeout' | 'idle_timeout' | 'aborted' | 'output_cap';

export interface SandboxExit {
  reason: SandboxExitReason;
  exitCode: number | null;
  signal: string | null;
  durationMs: number;
  stdoutBytes: number;
  stderrBytes: number;
  /** Last few KiB of each stream, for error messages (untrusted text). */
  stdoutTail: string;
  stderrTail: string;
  /** Set when the sandbox was stopped because /out held more than its caps (reason `output_cap`). */
  outDirOverflow?: string;
}

export interface SandboxHandle {
  /** Host pid of the outermost process (bwrap or docker client), for diagnostics. */
  readonly pid: number | undefined;
  readonly exit: Promise<SandboxExit>;
  /** Resets the idle timer (called by the broker on every request from this child). */
  markActivity(): void;
  /** SIGTERM, grace, SIGKILL. Resolves when the sandbox is gone. */
  kill(reason?: SandboxExitReason): Promise<void>;
}

/**
 * The log field that marks a record as a backend's advice to the admin (the text of
 * LauncherCheck.warning): a CLI that hides the daemon's log still shows these, as plain lines.
 */
export const LAUNCHER_WARNING_FIELD = 'launcherWarning';

export interface LauncherCheck {
  ok: boolean;
  /** When not ok: what is missing and how to install it. */
  reason?: string;
  /** When ok: something the admin should fix although the backend works (a stale child image). */
  warning?: string;
}

export interface Launcher {
  readonly name: LauncherName;
  /** Cheap readiness probe (binary present, user namespaces allowed, image exists…). */
  check(): Promise<LauncherCheck>;
  /**
   * Starts the sandbox. Throws FusionError('launch_failed', …, {retryable}) when the sandbox could
   * not be created; `retryable` is true only for transient failures before the child existed.
   */
  launch(spec: SandboxSpec): Promise<SandboxHandle>;
}

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = {
  wallMs: 50 * 60_000,
  idleMs: 35 * 60_000,
  maxStdoutBytes: 32 * 1024 * 1024,
  maxStderrBytes: 16 * 1024 * 1024,
  memoryBytes: 1024 * 1024 * 1024,
  maxProcesses: 64,
  tmpfsBytes: 64 * 1024 * 1024,
  killGraceMs: 3_000,
};

/** The complete environment of a candidate sandbox; the daemon's own never leaks in. */
export const CANDIDATE_ENV: Readonly<Record<string, string>> = {
  PATH: '/usr/local/bin:/usr/bin:/bin',
  HOME: '/tmp',
  NODE_OPTIONS: '--max-old-space-size=512',
};
