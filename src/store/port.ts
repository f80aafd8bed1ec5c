/**
 * The `Store` port: everything durable. SQL lives only in `store/` (docs/architecture.md#rule-3); the
 * rest of the daemon sees these types. Every method is atomic: a method that writes several
 * rows does so in one transaction, so a crash leaves either all of it or none.
 */
import type { TaskState } from '../contracts/task-state.js';
import type { Workflow } from '../contracts/constants.js';
import type { TaskOptions } from '../contracts/task-options.js';
import type { TaskUsage } from '../contracts/task-usage.js';

export interface TaskError {
  code: string;
  message: string;
  /** The state the task was in when it failed or was cancelled. */
  state: TaskState;
}

export interface TaskRecord {
  id: string;
  workflow: Workflow;
  state: TaskState;
  /** Absolute host path of the repository the task reads. */
  repoDir: string;
  /** Canonical input JSON text (docs/behaviour.md#a7), byte-exact as hashed. */
  canonicalInput: string;
  canonicalInputSha256: string;
  /** Budget plan JSON text written at preflight. */
  budgetPlan: string;
  /** Task options (sandbox backend, model roster, …), checked against their schema on the way out. */
  options: TaskOptions;
  createdAt: string;
  updatedAt: string;
  error: TaskError | null;
  /** Usage (tokens per stage and model), checked against its schema on the way out; null until recorded. */
  usage: TaskUsage | null;
  usageDelivered: boolean;
  /** How many times restart recovery resumed this task. */
  resumeCount: number;
  /** The socket caller's uid (SO_PEERCRED) that submitted it; null when unknown (older tasks). */
  callerUid: number | null;
  /**
   * sha256 of the task's repository snapshot: packed at submission (cluster mode), or when its
   * run started (single host; null until then).
   */
  bundleDigest: string | null;
  /** The socket caller's gid at submission; null/absent when unknown. */
  callerGid?: number | null;
  /** The socket caller's supplementary groups at submission (SO_PEERGROUPS); null/absent when unknown. */
  callerGroups?: number[] | null;
}

export interface NewTask {
  id: string;
  workflow: Workflow;
  repoDir: string;
  canonicalInput: string;
  canonicalInputSha256: string;
  budgetPlan: string;
  /** Stored as canonical JSON. */
  options: TaskOptions;
  /** The submitting caller's uid (SO_PEERCRED); null when unknown. */
  callerUid: number | null;
  /** The submitting caller's gid and supplementary groups (the single-host packer runs with them). */
  callerGid?: number | null;
  callerGroups?: number[] | null;
  /** Cluster mode: the packed repository, stored once by digest in the task's own transaction. */
  bundle?: { digest: string; data: Buffer };
  /**
   * The task must wait for a run slot: it is created `queued` (its `initializing → queued` event in
   * the same commit), not marked so by a second transaction.
   */
  queued?: boolean;
  /** Checkpoints known at submission (cluster mode: the repository snapshot), committed with the task row. */
  checkpoints?: ReadonlyArray<{ key: string; value: string }>;
}

/** A stored repository bundle (cluster mode): the deterministic tar whose sha256 is `digest`. */
export interface RepoBundleRecord {
  digest: string;
  data: Buffer;
  bytes: number;
  createdAt: string;
}

export type TaskEventKind = 'transition' | 'progress' | 'terminal';

export interface TaskEvent {
  /** Monotonic per store, usable as a cursor. */
  seq: number;
  taskId: string;
  at: string;
  kind: TaskEventKind;
  /** JSON-serialisable payload (from/to states, stage progress, terminal notification). */
  data: Record<string, unknown>;
}

export interface TransitionPatch {
  error?: TaskError;
  usage?: string;
  /** Extra fields for the transition event. */
  eventData?: Record<string, unknown>;
  /** Records the task's repository snapshot digest, unless one is recorded already (single host: the run's first transition). */
  bundleDigest?: string;
}

export interface AttemptRecord {
  taskId: string;
  /** `candidate-1`, `evaluator`, `repair`, `merger`. */
  stage: string;
  attempt: number;
  status: 'running' | 'succeeded' | 'failed';
  startedAt: string;
  endedAt: string | null;
  /** JSON text: exit info, error, tarball path and digest. */
  detail: string | null;
  tarballPath: string | null;
  tarballSha256: string | null;
}

/**
 * The detail an attempt is closed with when the run that owned it is gone (a killed or restarted
 * daemon, a run set aside on a full disk): closed as interrupted, never left `running`.
 */
export const INTERRUPTED_ATTEMPT_DETAIL = JSON.stringify({
  interrupted: true,
  error: { code: 'supervisor_restarted', message: 'the run stopped while this attempt ran (the daemon stopped, or the run was set aside on a full disk); it was closed, not finished' },
});

export interface AttemptOutcome {
  status: 'succeeded' | 'failed';
  detail?: string;
  tarballPath?: string;
  tarballSha256?: string;
  /** Stage checkpoints committed with the outcome (upserted by key). */
  checkpoints?: ReadonlyArray<{ key: string; value: string }>;
  /** The task's usage JSON text, committed with the outcome. */
  usage?: string;
}

export interface ResultRecord {
  taskId: string;
  /** Absolute host path of the answer file. */
  answerPath: string;
  answerSha256: string;
  answerBytes: number;
  /**
   * The answer's bytes. A store shared by several hosts (PostgreSQL, cluster mode) keeps them in
   * the row, so any daemon serves the result without the writer's disk; SQLite keeps only the
   * file at `answerPath`, and reads it back as absent.
   */
  answerData?: Buffer;
  /** Canonical JSON text of the result metadata (engine, stages, digests of attempts…). */
  metadata: string;
  metadataSha256: string;
  committedAt: string;
}

/** A task's sealed tarball as stored (the bytes live in the database, not on disk). */
export interface TaskTarballRecord {
  taskId: string;
  sha256: string;
  bytes: number;
  /** sha256 of the manifest member; the signature is over it. */
  manifestSha256: string;
  /** Ed25519 signature (base64), null when no signing key was configured. */
  signature: string | null;
  /** sha256 of the signing public key (DER), null when unsigned. */
  publicKeySha256: string | null;
  createdAt: string;
  data: Buffer;
}

export interface ListTasksQuery {
  state?: TaskState;
  limit?: number;
  /** Only the tasks this caller submitted. */
  callerUid?: number;
}

export interface Store {
  /** Runs migrations; idempotent. */
  init(): Promise<void>;
  close(): Promise<void>;

  /** Inserts the task in `initializing` with its first event, in one transaction. */
  createTask(task: NewTask): Promise<TaskRecord>;
  getTask(id: string): Promise<TaskRecord | null>;
  /** The stored bundle of `digest` as stored (the caller verifies its bytes), or null. */
  getRepoBundle(digest: string): Promise<RepoBundleRecord | null>;
  listTasks(query?: ListTasksQuery): Promise<TaskRecord[]>;
  /** The repository snapshot digests that non-terminal tasks name (never pruned). */
  listLiveBundleDigests(): Promise<Set<string>>;
  /** Deletes stored bundles created before `beforeIso` that no non-terminal task names; how many. */
  pruneRepoBundles(beforeIso: string): Promise<number>;
  listNonTerminalTasks(): Promise<TaskRecord[]>;

  /**
   * Compare-and-set of the state with its transition event (and a terminal event when `to` is
   * terminal) in one transaction. Returns the updated task, or null when the task was not in
   * `from` (someone else moved it). Throws invalid_transition for a move the table forbids.
   */
  transitionTask(id: string, from: TaskState, to: TaskState, patch?: TransitionPatch): Promise<TaskRecord | null>;
  appendEvent(taskId: string, kind: TaskEventKind, data: Record<string, unknown>): Promise<TaskEvent>;
  listEvents(taskId: string, afterSeq?: number): Promise<TaskEvent[]>;
  incrementResumeCount(id: string): Promise<number>;
  saveUsage(id: string, usage: string): Promise<void>;
  /** Atomically marks usage delivered; true only for the first caller. */
  claimUsageDelivery(id: string): Promise<boolean>;

  /**
   * Stage checkpoints (candidate answers, anonymisation map, evaluation; in cluster mode also each
   * attempt's archived tarball, audit/attempt-archive.ts), keyed per task.
   */
  saveCheckpoint(taskId: string, key: string, value: string): Promise<void>;
  getCheckpoint(taskId: string, key: string): Promise<string | null>;
  /**
   * Drops a task's checkpoints once its sealed tarball holds them, so each is kept once. Only
   * for a task that has a tarball (a no-op otherwise: resume still needs them); returns how many
   * were dropped. (Port addition: an adapter may implement it as that one guarded DELETE.)
   */
  dropSealedCheckpoints(taskId: string): Promise<number>;

  startAttempt(taskId: string, stage: string): Promise<AttemptRecord>;
  /**
   * Closes a running attempt. Its `checkpoints` and the task's `usage` are written in the SAME
   * transaction as a success: a stage's success and the checkpoint that lets a resumed run skip it
   * are one commit, so a crash leaves both or neither (docs/behaviour.md#b13: a finished stage
   * never runs again).
   */
  finishAttempt(taskId: string, stage: string, attempt: number, outcome: AttemptOutcome): Promise<void>;
  /**
   * Closes every attempt of the task still `running` as `failed` with `detail` (the run that
   * owned them is gone: a killed or restarted daemon); returns how many. Called before a resume
   * and before a task is failed by recovery, so no terminal task (nor its sealed tarball) keeps
   * an attempt `running`.
   */
  closeRunningAttempts(taskId: string, detail: string): Promise<number>;
  listAttempts(taskId: string): Promise<AttemptRecord[]>;

  /** Commits the result and moves `merging → completed` in one transaction; null if the task was not merging. */
  commitResult(result: ResultRecord, patch?: TransitionPatch): Promise<TaskRecord | null>;
  getResult(taskId: string): Promise<ResultRecord | null>;

  /** Stores a task's sealed tarball once; false when the task already has one (evidence is never replaced). */
  saveTaskTarball(record: TaskTarballRecord): Promise<boolean>;
  getTaskTarball(taskId: string): Promise<TaskTarballRecord | null>;
  /** Every task tarball sealed without a signature: task id and tarball sha256 (what a new signing key records). */
  listUnsignedTaskTarballs(): Promise<Array<{ taskId: string; sha256: string }>>;
  /** Terminal tasks last updated before `beforeIso`, oldest first (retention). */
  listTerminalTasksBefore(beforeIso: string, limit: number): Promise<TaskRecord[]>;
  /** Terminal tasks without a sealed tarball (a daemon killed between the commit and the seal), oldest first. */
  listUnsealedTerminalTasks(limit: number): Promise<TaskRecord[]>;
  /** Deletes a terminal task with everything keyed to it; false when absent or not terminal. */
  deleteTerminalTask(taskId: string): Promise<boolean>;
  /** Task count per state (metrics). */
  countTasksByState(): Promise<Record<string, number>>;
  /** Online copy of the whole database into a new file (sqlite's backup API). */
  backupTo(file: string): Promise<void>;
}
