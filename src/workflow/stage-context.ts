/**
 * What every stage of one task shares: the task, its directories, the dependencies, and the
 * usage ledger. Built once per run by the workflow.
 */
import type { Logger } from '../log.js';
import type { TaskRecord } from '../store/port.js';
import type { TaskControl } from '../tasks/runner-port.js';
import type { Launcher, LauncherName, SandboxLimits } from '../launcher/port.js';
import type { Roster } from '../models/roster.js';
import type { TaskOptions } from '../contracts/task-options.js';
import type { StageWorkers } from './stage-workers.js';
import type { SandboxOwner } from '../launcher/attempt-dirs.js';
import type { FetchRequest, FetchResponse } from '../contracts/broker-protocol.js';
import type { BudgetPlan } from '../contracts/budget.js';
import type { ReplayMetrics } from '../audit/replay.js';

export type Fetcher = (req: FetchRequest, signal: AbortSignal) => Promise<FetchResponse>;

export interface WorkflowDeps {
  log: Logger;
  tasksDir: string;
  /** Root under which per-attempt staging directories are made (outside the 0700 data dir). */
  runRoot: string;
  /** Host directory of the built code (dist/), bound read-only at /opt/fusion. */
  codeDir: string;
  /** The worker thread entry of the stage pool (evaluator/repair/merger). */
  stageJobFile: string;
  launcherFor(choice: 'auto' | LauncherName): Promise<Launcher>;
  /** The models serving a task, from its stored options (per-task overrides on the configured roster). */
  rosterFor(options: TaskOptions): { roster: Roster; describe(): unknown };
  stageWorkers: StageWorkers;
  sandboxOwner: SandboxOwner | null;
  sandboxLimits: SandboxLimits;
  /** Guarded fetch for research candidates (egress issue); absent → research candidates cannot fetch. */
  fetcher?: Fetcher;
  /** Injected for the anonymisation test vector. */
  randomBytes4?: () => Buffer;
  /** Stage worker wall timeout. */
  stageTimeoutMs?: number;
  /**
   * Cluster mode: store each attempt's evidence in the database at its commit
   * (audit/attempt-archive.ts), so a daemon that did not run it can seal the task.
   */
  archiveAttempts?: boolean;
  /** Replay every repository tool call before evaluation (default true; false only for benchmarks' baseline). */
  replay?: boolean;
  /** The daemon's replay metrics (src/instrument.ts); absent, nothing is counted. */
  replayMetrics?: ReplayMetrics;
}

export interface UsageEntry {
  stage: string;
  model: string;
  requests: number;
  inputTokens: number;
  outputTokens: number;
  /** In the configured price unit; absent when the model has no price. */
  cost?: number;
}

export interface AttemptSummary {
  stage: string;
  attempt: number;
  tarballPath: string;
  tarballSha256: string;
}

export interface RunState {
  task: TaskRecord;
  control: TaskControl;
  signal: AbortSignal;
  log: Logger;
  canonicalInput: { workflow: 'investigate' | 'research'; context: { declared_sources: Array<{ canonical_url: string }> } } & Record<string, unknown>;
  plan: BudgetPlan;
  usage: UsageEntry[];
  attempts: AttemptSummary[];
  /** Pages the research candidates fetched (declared URL + extracted content), for the evaluator's URL checks. */
  fetched: Array<{ url: string; content: string }>;
  /** Fetches that failed (requested URL, `code: message`), so the answer can say which sources were not read and why. */
  unread?: Array<{ url: string; reason: string }>;
  roster: Roster;
}
