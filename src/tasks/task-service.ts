/**
 * The task layer: durable preflight and receipts, dispatch, cancel, restart recovery, and the
 * bridge between workflow state changes and waiting clients.
 *
 * Durability rule: the receipt is returned only after the task row, the canonical input and
 * the budget plan are committed (fsynced files + a committed SQLite transaction). Everything
 * that can reject the input runs before anything is created (docs/behaviour.md#a8).
 */
import { randomBytes } from 'node:crypto';
import { realpathSync, statSync } from 'node:fs';
import { dirname, isAbsolute, resolve, sep } from 'node:path';
import type { Logger } from '../log.js';
import { FusionError, toFusionError } from '../errors.js';
import { TOOL_NAMES, type Workflow } from '../contracts/constants.js';
import { normalizeToolInput } from '../contracts/tool-input.js';
import { buildCanonicalInput, canonicalJson, sha256Hex, sourcePolicy } from '../contracts/canonical.js';
import { receiptText, type Receipt } from '../contracts/api.js';
import type { TaskOptions } from '../contracts/task-options.js';
import { INTERRUPTED_ATTEMPT_DETAIL, type Store, type TaskRecord, type TransitionPatch } from '../store/port.js';
import { isTerminal, type TaskState } from '../contracts/task-state.js';
import type { TaskEventBus } from './event-bus.js';
import type { Dispatcher } from './dispatcher.js';
import type { ClusterSignals, QueuedRun, TaskQueue } from './cluster-port.js';
import type { RepoSnapshotReport, TaskControl, TaskRunner } from './runner-port.js';
import { assertForecastWithinBudget, planBudget, type BudgetConfig } from '../contracts/budget.js';
import { taskPaths } from './paths.js';
import { asStorageFull, isStorageFull } from '../store/storage-full.js';
import { mkdirDurable, mkdirDurableAsync, writeFileDurable, writeFileDurableAsync } from '../common/durable-fs.js';
import { isPrivileged, type CallerIdentity } from './caller.js';
import type { RepoAccessCheck } from './repo-access.js';
import { join } from 'node:path';
import type { PackRequest } from '../bundles/pack-as-caller.js';
import type { PackedBundle } from '../bundles/pack.js';
import { DEFAULT_REPO_EXCLUDES } from '../bundles/excludes.js';

export interface TaskServiceDeps {
  store: Store;
  bus: TaskEventBus;
  dispatcher: Dispatcher;
  runner: TaskRunner;
  log: Logger;
  tasksDir: string;
  budget?: BudgetConfig;
  /** How many times restart recovery may resume one task before failing it. */
  maxResumes?: number;
  /** Extra validation of the task options (model overrides; throws invalid_input), returning the prompt budgets of the roster that will serve the task. */
  preflightOptions?: (options: TaskOptions) => BudgetConfig | undefined;
  /** How long cancel waits for the task's sandboxes to be gone. */
  cancelSettleMs?: number;
  /**
   * Called once a task is terminal and its run has settled (the sealed task tarball); before
   * the terminal notification is published for completed and failed tasks. Its errors are
   * logged, never change the task.
   */
  onTerminal?: (taskId: string) => Promise<void>;
  /** Admission (docs/behaviour.md#b2): bounds on tasks waiting for a run slot; absent → unbounded. */
  admission?: { maxQueued: number; maxQueuedPerCaller: number; concurrency: number };
  /** Throws storage_full when the data directory's disk is below its reserve (checked before anything is created, and before a run set aside on a full disk resumes). */
  assertStorage?: () => void;
  /** How long a run that met a full disk waits for space before the task fails storage_full; default STORAGE_WAIT_MS. */
  storageWaitMs?: number;
  /** Resolves a repository as a non-privileged caller, refusing one it could not read (docs/security.md#socket-callers). */
  checkRepo?: RepoAccessCheck;
  /** The daemon's uid (privileged like root); default process.getuid(). */
  daemonUid?: number;
  /**
   * Cluster mode (docs/operations.md#cluster-mode): tasks go to the shared queue instead of
   * `dispatcher`, and any daemon of the cluster may run them; `signals` carries new events and
   * cancels between the daemons; `daemonId` names this daemon in the events of the runs it takes.
   */
  cluster?: { queue: TaskQueue; signals: ClusterSignals; daemonId: string };
  /**
   * Repository snapshots (docs/operations.md#repository-snapshots): the repository is packed as
   * the caller into a bundle and the task runs over its verified, unpacked, root-owned tree,
   * never the submitter's path. With `cluster` it is packed at submission and stored with the
   * task (any daemon may run it); on a single host it is packed when the run starts (`install`),
   * and a resumed run reuses the tree it started over.
   */
  bundles?: RepoBundles;
}

export interface RepoBundles {
  pack(req: PackRequest): Promise<PackedBundle>;
  checkout(digest: string): Promise<string>;
  /** Single host: verifies and unpacks a bundle just packed here; its tree. Absent: single-host tasks read their path. */
  install?(bundle: { digest: string; data: Buffer }): Promise<string>;
  /** Holds a tree against pruning while a run uses it. */
  pin?(digest: string): () => void;
  /** The cap on a bundle's archive size, bytes. */
  maxBytes: number;
}

/** The checkpoint holding what the task's snapshot left out (RepoSnapshotReport). */
export const SNAPSHOT_CHECKPOINT = 'repo-snapshot';

export interface SubmitRequest {
  workflow: Workflow;
  arguments: unknown;
  repo: string;
  options?: TaskOptions;
  /** Who submits (a fairness label for the per-caller bound, not an identity check); default "local". */
  caller?: string;
  /** The kernel-reported caller (SO_PEERCRED), recorded on the task; absent → an in-process caller. */
  identity?: CallerIdentity;
}

type AbortReason = 'cancel' | 'shutdown';

/** Bus cursors kept for ended tasks (their late events); older ones are forgotten. */
export const MAX_ENDED_CURSORS = 256;

export class TaskService {
  /** `unadmit` gives back the task's waiting place (idempotent; also done when it starts). */
  private readonly controllers = new Map<string, { ac: AbortController; settled: Promise<void>; started: boolean; unadmit: () => void }>();
  private accepting = true;
  /** Set when the daemon started on a full disk: why nothing is accepted. */
  private readOnlyReason: string | undefined;
  private readonly log: Logger;
  /** Tasks admitted but not started yet, per caller (reserved synchronously, so a flood cannot overshoot). */
  private readonly waiting = new Map<string, number>();
  private waitingTotal = 0;
  /** Per task: the pending `initializing → queued` write, awaited before the task starts. */
  private readonly queueing = new Map<string, Promise<void>>();
  /** Mean wall time of recent runs (for Retry-After), exponentially weighted. */
  private meanRunMs = 30_000;

  constructor(private readonly deps: TaskServiceDeps) {
    this.log = deps.log.child({ component: 'tasks' });
  }

  get bus(): TaskEventBus {
    return this.deps.bus;
  }

  get store(): Store {
    return this.deps.store;
  }

  async submit(req: SubmitRequest): Promise<Receipt> {
    if (!this.accepting) throw new FusionError('shutting_down', 'the daemon is shutting down and accepts no new tasks; retry after it restarts');
    // 1. The cheap refusals first, so a flood is shed at O(1) per submit (no canonicalisation):
    //    no receipt when the commit could not be durable, nor when too many tasks already wait.
    if (this.readOnlyReason !== undefined) throw new FusionError('storage_full', `${this.readOnlyReason}; no task was accepted`, { details: { readOnly: true, retryAfterSeconds: 60 } });
    this.deps.assertStorage?.();
    const caller = req.caller ?? 'local';
    // Cluster mode: the shared queue holds waiting tasks (not this daemon), so it has no local bound.
    if (this.deps.cluster === undefined) this.admit(caller);
    let admitted = this.deps.cluster === undefined;
    const release = (): void => {
      if (!admitted) return;
      admitted = false;
      this.waitingTotal--;
      const left = (this.waiting.get(caller) ?? 1) - 1;
      if (left <= 0) this.waiting.delete(caller);
      else this.waiting.set(caller, left);
    };
    // 2. Everything that can reject the request, before anything exists.
    let prepared: ReturnType<typeof prepareSubmit>;
    let bundle: PackedBundle | undefined;
    try {
      prepared = prepareSubmit(req, await this.repoAsCaller(req), this.deps);
      // Cluster mode: the repository travels with the task (read as the caller, like the check).
      bundle = await this.packBundle(req, prepared.repoDir);
    } catch (err) {
      release();
      throw err;
    }
    const { repoDir, canonicalInput, canonicalText, canonicalSha, plan } = prepared;

    // 3. Durable preflight: one committed SQLite transaction holds the task row with its
    //    canonical input and budget plan (synchronous=FULL). The task directory's copies are
    //    written when the task starts: they are conveniences, not the record.
    const taskId = `${req.workflow}-${randomBytes(16).toString('hex')}`;
    let task: TaskRecord;
    try {
      task = await this.deps.store.createTask({
        id: taskId,
        workflow: req.workflow,
        repoDir,
        canonicalInput: canonicalText,
        canonicalInputSha256: canonicalSha,
        budgetPlan: canonicalJson(plan),
        options: canonicalJson(req.options ?? {}),
        callerUid: req.identity?.uid ?? null,
        callerGid: req.identity?.gid ?? null,
        callerGroups: req.identity?.groups ?? null,
        ...(bundle !== undefined ? { bundle: { digest: bundle.digest, data: bundle.data } } : {}),
      });
    } catch (err) {
      release();
      throw asStorageFull(err);
    }
    // Waiters learn of the new task on the next turn; the receipt does not wait for them.
    setImmediate(() => void this.publishNewEvents(taskId).catch(() => undefined));
    this.log.info({ taskId, workflow: req.workflow, state: task.state, ...(bundle !== undefined ? { bundleDigest: bundle.digest, bundleBytes: bundle.data.length, bundleSkipped: bundle.skipped } : {}) }, 'task accepted');

    // 4. Only now is anything started. Cluster mode: the job is in the shared queue before the
    //    receipt is returned (a task without its job would wait for nobody).
    if (this.deps.cluster !== undefined) {
      if (bundle !== undefined) await this.deps.store.saveCheckpoint(taskId, SNAPSHOT_CHECKPOINT, snapshotJson(bundle));
      await this.enqueueOrFail(task);
      return receiptOf(req.workflow, task, canonicalInput.request.sha256, canonicalSha);
    }
    // A task that must wait for a run slot says so (queued), written after the receipt so the
    // receipt does not wait for it.
    if (this.deps.admission !== undefined && this.deps.dispatcher.running + this.deps.dispatcher.queued >= this.deps.admission.concurrency) {
      this.queueing.set(taskId, this.markQueued(taskId));
    }
    this.start(task, false, release);
    return receiptOf(req.workflow, task, canonicalInput.request.sha256, canonicalSha);
  }

  /** Cluster mode: queues the new task's job; a task whose job could not be queued fails at once. */
  private async enqueueOrFail(task: TaskRecord): Promise<void> {
    const cluster = this.deps.cluster;
    if (cluster === undefined) return;
    try {
      await cluster.queue.enqueue(task);
    } catch (err) {
      const fe = new FusionError('dispatch_failed', `the task could not be handed to the cluster queue: ${(err as Error).message}`, { cause: err });
      await this.fail(task.id, fe);
      throw fe;
    }
  }

  /**
   * Cluster mode: runs a task this daemon's worker took from the shared queue, and resolves when
   * the run settled. A task found past `queued` was running on a daemon that died or drained: it
   * is resumed from its last committed stage boundary under the restart-recovery rules (one
   * resume, then supervisor_restarted), exactly as a restarted daemon would.
   */
  async runQueued(job: QueuedRun): Promise<void> {
    const cluster = this.deps.cluster;
    const task = await this.deps.store.getTask(job.taskId);
    if (cluster === undefined || task === null || isTerminal(task.state) || !this.accepting) return;
    let resume = false;
    if (hasRun(task.state)) {
      const maxResumes = this.deps.maxResumes ?? 1;
      if (task.resumeCount >= maxResumes) {
        await this.fail(task.id, new FusionError('supervisor_restarted', `the daemon running the task stopped while it was ${task.state}; it had already been resumed ${task.resumeCount} time(s), so it was not resumed again. Submit it again.`, { stage: task.state }));
        return;
      }
      await this.deps.store.incrementResumeCount(task.id);
      await this.deps.store.appendEvent(task.id, 'progress', { recovery: 'resumed', state: task.state, daemon: cluster.daemonId });
      this.log.warn({ taskId: task.id, state: task.state }, 'resuming a task whose daemon stopped');
      resume = true;
    } else {
      await this.deps.store.appendEvent(task.id, 'progress', { daemon: cluster.daemonId });
    }
    await this.publishNewEvents(task.id);
    const ac = new AbortController();
    let release!: () => void;
    const settled = new Promise<void>((r) => (release = r));
    this.controllers.set(task.id, { ac, settled, started: true, unadmit: () => undefined });
    const drain = (): void => ac.abort('shutdown' satisfies AbortReason);
    job.signal.addEventListener('abort', drain, { once: true });
    try {
      await this.runTask(resume ? { ...task, resumeCount: task.resumeCount + 1 } : task, ac, resume);
    } finally {
      job.signal.removeEventListener('abort', drain);
      this.controllers.delete(task.id);
      release();
    }
  }

  /**
   * Cluster mode, at start-up: every unfinished task gets its queue job again (a no-op for the
   * tasks whose job exists), so a task whose submitting daemon died before queueing it still runs.
   */
  async requeueUnfinished(): Promise<number> {
    const cluster = this.deps.cluster;
    if (cluster === undefined) return 0;
    const unfinished = await this.deps.store.listNonTerminalTasks();
    for (const task of unfinished) await cluster.queue.enqueue(task);
    return unfinished.length;
  }

  /** Cluster mode: another daemon committed events of `taskId`; feed them to the local waiters. */
  remoteEvents(taskId: string): void {
    void this.publishNewEvents(taskId, undefined, true).catch(() => undefined);
  }

  /** Cluster mode: another daemon cancelled `taskId`; stop the local run, if this daemon has it. */
  remoteCancel(taskId: string): void {
    this.controllers.get(taskId)?.ac.abort('cancel' satisfies AbortReason);
  }

  /**
   * The repository path a non-privileged caller asked for, as that caller sees it (its physical
   * path), or a refusal when it could not read it. Root and the daemon's uid read anything.
   */
  private async repoAsCaller(req: SubmitRequest): Promise<string> {
    const caller = req.identity;
    if (caller === undefined || isPrivileged(caller, this.deps.daemonUid ?? process.getuid?.() ?? 0) || !isAbsolute(req.repo.trim())) return req.repo;
    if (this.deps.checkRepo === undefined) throw new FusionError('internal_error', 'no repository check is configured for non-root callers');
    return this.deps.checkRepo(req.repo.trim(), caller);
  }

  /** Cluster mode: the task's repository bundle, packed as the caller; undefined outside cluster mode. */
  private async packBundle(req: SubmitRequest, repoDir: string): Promise<PackedBundle | undefined> {
    const bundles = this.deps.bundles;
    if (this.deps.cluster === undefined || bundles === undefined) return undefined;
    const caller = req.identity;
    const asCaller = caller !== undefined && !isPrivileged(caller, this.deps.daemonUid ?? process.getuid?.() ?? 0);
    return bundles.pack({ repo: repoDir, exclude: req.options?.repoExclude ?? DEFAULT_REPO_EXCLUDES, maxBytes: bundles.maxBytes, ...(asCaller ? { caller } : {}) });
  }

  /**
   * The repository a run reads (docs/operations.md#repository-snapshots). A task that names a
   * snapshot runs over that one (cluster: fetched and verified; single host: the tree it
   * started over, or repo_snapshot_missing when it is gone: never the repository as it is now).
   * A single-host task starting its run is packed now, as its caller (the kernel decides what
   * the caller can read), and `pending` is the digest its first transition records.
   */
  private async repositoryFor(task: TaskRecord, signal: AbortSignal): Promise<{ repoDir: string; report?: RepoSnapshotReport; pending?: string; release: () => void }> {
    const bundles = this.deps.bundles;
    const none = (): void => undefined;
    if (bundles === undefined) return { repoDir: task.repoDir, release: none };
    const readReport = async (): Promise<RepoSnapshotReport | undefined> => {
      const text = await this.deps.store.getCheckpoint(task.id, SNAPSHOT_CHECKPOINT);
      return text === null ? undefined : (JSON.parse(text) as RepoSnapshotReport);
    };
    if (task.bundleDigest !== null) {
      const release = bundles.pin?.(task.bundleDigest) ?? none;
      try {
        const repoDir = await bundles.checkout(task.bundleDigest);
        const report = await readReport();
        return { repoDir, release, ...(report !== undefined ? { report } : {}) };
      } catch (err) {
        release();
        throw err;
      }
    }
    if (this.deps.cluster !== undefined || bundles.install === undefined) return { repoDir: task.repoDir, release: none };
    const daemonUid = this.deps.daemonUid ?? process.getuid?.() ?? 0;
    let caller: { uid: number; gid: number; groups: number[] | null } | undefined;
    if (task.callerUid !== null && task.callerUid !== 0 && task.callerUid !== daemonUid) {
      if (task.callerGid === null || task.callerGid === undefined) {
        throw new FusionError('invalid_input', `the task records caller uid ${task.callerUid} without its groups, so its repository cannot be read as that caller; submit it again`, { details: { field: 'repo' } });
      }
      caller = { uid: task.callerUid, gid: task.callerGid, groups: task.callerGroups ?? null };
    }
    const started = Date.now();
    const packed = await bundles.pack({ repo: task.repoDir, exclude: optionsOf(task).repoExclude ?? DEFAULT_REPO_EXCLUDES, maxBytes: bundles.maxBytes, ...(caller !== undefined ? { caller } : {}), signal });
    const release = bundles.pin?.(packed.digest) ?? none;
    const bytes = packed.data.length;
    try {
      // The bytes move to the unpacking worker: not read after this.
      const repoDir = await bundles.install({ digest: packed.digest, data: packed.data });
      await this.deps.store.saveCheckpoint(task.id, SNAPSHOT_CHECKPOINT, snapshotJson(packed));
      this.log.info({ taskId: task.id, bundleDigest: packed.digest, bundleBytes: bytes, entries: packed.entries, skipped: packed.skipped.counts, ms: Date.now() - started }, 'repository snapshot taken');
      return { repoDir, report: snapshotReport(packed), pending: packed.digest, release };
    } catch (err) {
      release();
      throw err;
    }
  }

  async get(taskId: string): Promise<TaskRecord> {
    const task = await this.deps.store.getTask(taskId);
    if (!task) throw noSuchTask(taskId);
    return task;
  }

  /** Cancels a non-terminal task and waits (bounded) until its sandboxes are gone. Terminal tasks are returned as they are. */
  async cancel(taskId: string): Promise<TaskRecord> {
    for (;;) {
      const task = await this.get(taskId);
      if (isTerminal(task.state)) return task;
      const moved = await this.deps.store.transitionTask(taskId, task.state, 'cancelled', {
        error: { code: 'cancelled', message: `cancelled by request while ${task.state}`, state: task.state },
      });
      if (!moved) continue; // state moved under us; read again
      await this.publishNewEvents(taskId);
      this.log.info({ taskId, from: task.state }, 'task cancelled');
      const entry = this.controllers.get(taskId);
      if (!entry && this.deps.cluster !== undefined) {
        // Running (or queued) elsewhere in the cluster: tell its daemon, drop a job not started yet.
        await this.deps.cluster.signals.cancel(taskId).catch((err: unknown) => this.log.warn({ taskId, err }, 'could not signal the cancel to the cluster'));
        await this.deps.cluster.queue.removeWaiting(taskId);
      }
      if (entry) {
        entry.ac.abort('cancel' satisfies AbortReason);
        // A task still waiting for its run slot waits no more: its place is free now, not when
        // the slot it waited for frees. It has no sandbox to wait for either.
        if (!entry.started) entry.unadmit();
        if (entry.started) await settleWithin(entry.settled, this.deps.cancelSettleMs ?? 15_000);
        // A run that did not settle in time leaves no attempt `running` in the sealed tarball.
        await this.deps.store.closeRunningAttempts(taskId, INTERRUPTED_ATTEMPT_DETAIL).catch((e: unknown) => this.log.warn({ taskId, err: e }, 'could not close the attempts of a cancelled run'));
      }
      // Sealed once its runs have stopped, so the tarball holds what they left.
      await this.terminalHook(taskId);
      // The stopped run has recorded the usage of every model call it made: return it too.
      return (await this.deps.store.getTask(taskId)) ?? moved;
    }
  }

  /** Resumes or fails every task found non-terminal at start-up. */
  async recover(): Promise<{ resumed: string[]; failed: string[] }> {
    const maxResumes = this.deps.maxResumes ?? 1;
    const resumed: string[] = [];
    const failed: string[] = [];
    for (const task of await this.deps.store.listNonTerminalTasks()) {
      // A task that never started running (only queued or initializing) has nothing to resume:
      // it runs from the start and does not use up its resume.
      if (!hasRun(task.state)) {
        await this.deps.store.appendEvent(task.id, 'progress', { recovery: 'started', state: task.state });
        await this.publishNewEvents(task.id);
        this.log.info({ taskId: task.id, state: task.state }, 'starting a task that had not run before the restart');
        this.start(task, false);
        resumed.push(task.id);
        continue;
      }
      if (task.resumeCount >= maxResumes) {
        await this.fail(
          task.id,
          new FusionError('supervisor_restarted', `the daemon restarted while the task was ${task.state}; it had already been resumed ${task.resumeCount} time(s), so it was not resumed again. Submit it again.`, { stage: task.state }),
        );
        failed.push(task.id);
        continue;
      }
      await this.deps.store.incrementResumeCount(task.id);
      await this.deps.store.appendEvent(task.id, 'progress', { recovery: 'resumed', state: task.state });
      await this.publishNewEvents(task.id);
      this.log.warn({ taskId: task.id, state: task.state }, 'resuming task after restart');
      this.start({ ...task, resumeCount: task.resumeCount + 1 }, true);
      resumed.push(task.id);
    }
    return { resumed, failed };
  }

  /**
   * Seals the terminal tasks a killed daemon left unsealed (it died between the commit and the
   * seal): every terminal task ends with its tarball, whenever the daemon stopped.
   */
  async sealUnsealed(limit = 1000): Promise<string[]> {
    const sealed: string[] = [];
    for (const task of await this.deps.store.listUnsealedTerminalTasks(limit)) {
      await this.terminalHook(task.id);
      sealed.push(task.id);
    }
    return sealed;
  }

  /** Stops accepting work, aborts running tasks (they stay non-terminal for recovery), waits for them. */
  async shutdown(): Promise<void> {
    this.accepting = false;
    // Cluster mode: the queue's drain takes no new job and hands the active runs back (they are
    // aborted as by a shutdown and continued by another daemon).
    if (this.deps.cluster !== undefined) await this.deps.cluster.queue.close();
    for (const { ac } of this.controllers.values()) ac.abort('shutdown' satisfies AbortReason);
    await Promise.allSettled([...this.controllers.values()].map((c) => c.settled));
    await this.deps.dispatcher.drain();
  }

  private start(task: TaskRecord, resume: boolean, onStart: () => void = () => undefined): void {
    const ac = new AbortController();
    let release!: () => void;
    const settled = new Promise<void>((r) => (release = r));
    const entry = { ac, settled, started: false, unadmit: onStart };
    this.controllers.set(task.id, entry);
    this.deps.dispatcher.dispatch(task.id, async () => {
      entry.started = true;
      onStart();
      const started = Date.now();
      try {
        // The queued mark (if any) lands first, so the run starts from the state the store holds.
        const mark = this.queueing.get(task.id);
        this.queueing.delete(task.id);
        await mark;
        const current = mark === undefined ? task : ((await this.deps.store.getTask(task.id)) ?? task);
        await this.runTask(current, ac, resume);
      } finally {
        this.meanRunMs = 0.8 * this.meanRunMs + 0.2 * (Date.now() - started);
        this.controllers.delete(task.id);
        release();
      }
    });
  }

  /** Reserves a waiting place for `caller`, or refuses with busy (HTTP 429, Retry-After). */
  private admit(caller: string): void {
    const refusal = this.busyRefusal(caller);
    if (refusal !== undefined) throw refusal;
    this.waiting.set(caller, (this.waiting.get(caller) ?? 0) + 1);
    this.waitingTotal++;
  }

  /** The busy answer for `caller` now (the daemon's or its own waiting bound reached), else undefined. */
  private busyRefusal(caller: string): FusionError | undefined {
    const limits = this.deps.admission;
    if (limits === undefined) return undefined;
    const mine = this.waiting.get(caller) ?? 0;
    const whose = this.waitingTotal >= limits.maxQueued ? 'the daemon' : mine >= limits.maxQueuedPerCaller ? `caller ${JSON.stringify(caller)}` : undefined;
    if (whose === undefined) return undefined;
    const limit = whose === 'the daemon' ? limits.maxQueued : limits.maxQueuedPerCaller;
    const waiting = whose === 'the daemon' ? this.waitingTotal : mine;
    const retryAfterSeconds = Math.max(1, Math.ceil(((this.meanRunMs / 1000) * Math.max(1, waiting)) / Math.max(1, limits.concurrency) / 4));
    return new FusionError('busy', `the daemon is busy: ${waiting} tasks of ${whose} are already waiting (limit ${limit}); nothing was created. Retry in about ${retryAfterSeconds} s.`, {
      details: { waiting, limit, scope: whose === 'the daemon' ? 'daemon' : 'caller', retryAfterSeconds },
    });
  }

  /**
   * The refusals a submit of `caller` would meet whatever its body says (shutting down, read-only,
   * the waiting bounds), checked before the body is read and parsed: under a flood most submits
   * are refused, and each then costs no more than its headers. Reserves nothing; `submit` still
   * admits (or refuses) the request that gets past this.
   */
  refuseEarly(caller: string | undefined): void {
    if (!this.accepting) throw new FusionError('shutting_down', 'the daemon is shutting down and accepts no new tasks; retry after it restarts');
    if (this.readOnlyReason !== undefined) throw new FusionError('storage_full', `${this.readOnlyReason}; no task was accepted`, { details: { readOnly: true, retryAfterSeconds: 60 } });
    if (this.deps.cluster !== undefined) return;
    const refusal = this.busyRefusal(caller ?? 'local');
    if (refusal !== undefined) throw refusal;
  }

  private async markQueued(taskId: string): Promise<void> {
    try {
      if (await this.deps.store.transitionTask(taskId, 'initializing', 'queued')) await this.publishNewEvents(taskId);
    } catch (err) {
      // The task still runs in its turn; only the visible state is missing.
      this.log.warn({ taskId, err: toFusionError(err) }, 'could not mark the task queued');
    }
  }

  /** Read-only mode (a start on a full disk): every submit is refused with storage_full and this reason. */
  setReadOnly(reason: string): void {
    this.readOnlyReason = reason;
  }

  /** Tasks waiting for a run slot now (health, metrics). */
  get waitingCount(): number {
    return this.waitingTotal;
  }

  private async runTask(task: TaskRecord, ac: AbortController, resume: boolean): Promise<void> {
    const waitUntil = Date.now() + (this.deps.storageWaitMs ?? STORAGE_WAIT_MS);
    let backoff: number = STORAGE_BACKOFF_MS.first;
    for (;;) {
      const err = await this.runOnce(task, ac, resume);
      if (err === undefined) return;
      if (!isStorageFull(err) || ac.signal.aborted) return this.failRun(task.id, ac, err);
      // A full disk is a state, not a bug (docs/behaviour.md#b13, storage_full): the run is set
      // aside, waits (backoff) for space and resumes from its committed checkpoints; a task
      // whose disk stays full past the wait fails storage_full.
      if (Date.now() >= waitUntil) return this.failRun(task.id, ac, storageFullError(this.deps.storageWaitMs ?? STORAGE_WAIT_MS));
      this.log.warn({ taskId: task.id, state: task.state, err: toFusionError(err).message, retryInMs: backoff }, 'the disk is full: the run is set aside until there is space again');
      if (!(await this.waitForSpace(backoff, waitUntil, ac.signal))) {
        if (ac.signal.aborted) return;
        return this.failRun(task.id, ac, storageFullError(this.deps.storageWaitMs ?? STORAGE_WAIT_MS));
      }
      backoff = Math.min(backoff * 2, STORAGE_BACKOFF_MS.max);
      const fresh = await this.deps.store.getTask(task.id).catch(() => null);
      if (fresh === null || isTerminal(fresh.state)) return;
      task = fresh;
      // Not a restart: the resume count stays; the attempts the failed run left open are closed by the resume.
      resume = true;
      await this.deps.store.appendEvent(task.id, 'progress', { recovery: 'storage_resumed', state: task.state }).catch(() => undefined);
      this.log.info({ taskId: task.id, state: task.state }, 'space is back: resuming the task set aside on a full disk');
    }
  }

  /** One run of the task; returns what stopped it, or undefined when it ended (or was stopped on purpose). */
  private async runOnce(task: TaskRecord, ac: AbortController, resume: boolean): Promise<unknown> {
    let release = (): void => undefined;
    try {
      if (ac.signal.aborted) return undefined;
      // The task runs over its snapshot (bundle_changed / repo_snapshot_missing fail it before anything runs).
      const repo = await this.repositoryFor(task, ac.signal);
      release = repo.release;
      const control = this.control(task, repo.pending);
      await this.writeTaskFiles(task);
      // A cancel or a drain that came while the bundle was checked out (a fetch, an unpack, a
      // flush): the runner would only see an abort signal fire, and this one already has.
      if (ac.signal.aborted) return undefined;
      await this.deps.runner.run({ task: { ...task, repoDir: repo.repoDir }, control, signal: ac.signal, resume, ...(repo.report !== undefined ? { repository: repo.report } : {}) });
      const after = await this.get(task.id);
      if (!isTerminal(after.state)) {
        throw new FusionError('internal_error', `the workflow returned without committing a result (state ${after.state})`);
      }
      return undefined;
    } catch (err) {
      return err;
    } finally {
      release();
    }
  }

  /** Ends a run that threw: a shutdown leaves the task for recovery, a cancel is already recorded, anything else fails it. */
  private async failRun(taskId: string, ac: AbortController, err: unknown): Promise<void> {
    if (ac.signal.aborted && ac.signal.reason === 'shutdown') {
      this.log.info({ taskId }, 'task interrupted by shutdown; left for restart recovery');
      return;
    }
    const fe = toFusionError(err);
    if (fe.code === 'cancelled' || (ac.signal.aborted && ac.signal.reason === 'cancel')) return;
    // Cluster mode: a database that went away is an interruption, not the task's failure; the
    // task stays unfinished and the queue reconciler gives it to a daemon once it is back.
    if (this.deps.cluster !== undefined && fe.code === 'store_error' && fe.details?.unreachable === true) {
      this.log.warn({ taskId, err: fe }, 'the database went away mid-run; the task is left unfinished and resumes once it is back');
      return;
    }
    // The failure itself must land: on a full disk its write is retried until space is back.
    let backoff: number = STORAGE_BACKOFF_MS.first;
    for (;;) {
      try {
        await this.fail(taskId, isStorageFull(fe) ? storageFullError(undefined, fe) : fe);
        return;
      } catch (writeErr) {
        if (!isStorageFull(writeErr) || ac.signal.aborted) throw writeErr;
        this.log.warn({ taskId, retryInMs: backoff }, 'the disk is full: the task\'s failure will be recorded once there is space');
        await sleep(backoff, ac.signal);
        backoff = Math.min(backoff * 2, STORAGE_BACKOFF_MS.max);
      }
    }
  }

  /** Sleeps `ms`, then waits (polling at `ms`) until the disk has its reserve free; false when the wait ended without space. */
  private async waitForSpace(ms: number, until: number, signal: AbortSignal): Promise<boolean> {
    for (;;) {
      await sleep(ms, signal);
      if (signal.aborted || Date.now() >= until) return false;
      try {
        this.deps.assertStorage?.();
        return true;
      } catch {
        // still below the reserve
      }
    }
  }

  /** `pendingDigest`: a snapshot taken for this run, recorded by its first transition (same transaction). */
  private control(task: TaskRecord, pendingDigest?: string): TaskControl {
    let current: TaskState = task.state;
    let pending = pendingDigest;
    const store = this.deps.store;
    const moved = async (next: TaskRecord | null, to: TaskState): Promise<TaskRecord> => {
      if (next) {
        current = next.state;
        await this.publishNewEvents(task.id);
        this.log.info({ taskId: task.id, state: to }, 'task state changed');
        return next;
      }
      const fresh = await this.get(task.id);
      if (fresh.state === 'cancelled') throw new FusionError('cancelled', 'the task was cancelled');
      throw new FusionError('invalid_transition', `task is ${fresh.state}, expected ${current} before moving to ${to}`);
    };
    return {
      taskId: task.id,
      store,
      transition: async (to, patch) => {
        const withDigest = pending !== undefined ? { ...patch, bundleDigest: pending } : patch;
        const next = await moved(await store.transitionTask(task.id, current, to, withDigest), to);
        pending = undefined;
        return next;
      },
      commit: async (result, patch) => {
        const next = await store.commitResult(result, patch);
        // Sealed before anyone is told the task completed, so bg_result can check the seal.
        if (next) await this.terminalHook(task.id);
        return moved(next, 'completed');
      },
      progress: async (data) => {
        await store.appendEvent(task.id, 'progress', data);
        await this.publishNewEvents(task.id);
      },
    };
  }

  /** Readable copies of the committed preflight records in the task directory (for admins and tarballs). */
  private async writeTaskFiles(task: TaskRecord): Promise<void> {
    // Off the event loop: a synchronous fsync here would stall every receipt of a flood.
    const paths = taskPaths(this.deps.tasksDir, task.id);
    await mkdirDurableAsync(paths.dir, 0o700);
    await writeFileDurableAsync(paths.inputFile, task.canonicalInput);
    await writeFileDurableAsync(paths.budgetFile, task.budgetPlan);
    if (task.workflow === 'research') {
      await writeFileDurableAsync(join(paths.dir, 'source-policy.json'), canonicalJson(sourcePolicy(JSON.parse(task.canonicalInput) as Parameters<typeof sourcePolicy>[0])));
    }
  }

  /** Fails a task from whatever non-terminal state it is in (CAS loop). */
  async fail(taskId: string, err: FusionError, patch: TransitionPatch = {}): Promise<void> {
    for (;;) {
      const task = await this.deps.store.getTask(taskId);
      if (!task || isTerminal(task.state)) return;
      // Attempts a stopped run left `running` are closed before the task ends (and is sealed):
      // the run failing it here has settled its own attempts already.
      await this.deps.store.closeRunningAttempts(taskId, INTERRUPTED_ATTEMPT_DETAIL);
      const done = await this.deps.store.transitionTask(taskId, task.state, 'failed', {
        ...patch,
        error: { code: err.code, message: err.message, state: task.state },
      });
      if (done) {
        await this.terminalHook(taskId);
        await this.publishNewEvents(taskId);
        this.log.warn({ taskId, state: task.state, code: err.code, err: err.message }, 'task failed');
        return;
      }
    }
  }

  /**
   * Cluster mode: a local copy of an answer another daemon committed (its bytes are in the
   * database), for artifact delivery; written once, durable, under this daemon's task directory.
   */
  materialiseAnswer(taskId: string, answer: Buffer): string {
    const paths = taskPaths(this.deps.tasksDir, taskId);
    mkdirDurable(paths.dir, 0o700);
    mkdirDurable(paths.resultDir, 0o700);
    writeFileDurable(paths.answerFile, answer);
    return paths.answerFile;
  }

  /** Where this daemon keeps a task's answer file (its data directory may have been restored elsewhere). */
  answerFileHere(taskId: string): string {
    return taskPaths(this.deps.tasksDir, taskId).answerFile;
  }

  /** Ids of the tasks this daemon is running now (their runs have not settled). */
  runningTaskIds(): Set<string> {
    return new Set(this.controllers.keys());
  }

  private async terminalHook(taskId: string): Promise<void> {
    if (this.deps.onTerminal === undefined) return;
    try {
      await this.deps.onTerminal(taskId);
    } catch (err) {
      this.log.error({ taskId, err: toFusionError(err) }, 'terminal hook failed (task tarball not sealed)');
    }
  }

  /** Bus cursor (seq of the last event put on the bus) per task that has not ended. */
  private readonly published = new Map<string, number>();
  /**
   * Cursors of recently ended tasks, oldest first, at most MAX_ENDED_CURSORS: a run stopped by a
   * cancel may still commit an event after the terminal one, and it is published once (not the
   * whole history again) without a cursor per ended task staying for the daemon's lifetime.
   */
  private readonly endedCursors = new Map<string, number>();

  /** Publishes committed events the bus has not seen yet, in order. */
  private async publishNewEvents(taskId: string, fromSeq?: number, remote = false): Promise<void> {
    const cursor = (): number => this.published.get(taskId) ?? this.endedCursors.get(taskId) ?? 0;
    const events = await this.deps.store.listEvents(taskId, fromSeq ?? cursor());
    // Cluster mode: the other daemons' waiters hear of what this daemon committed.
    if (!remote && events.length > 0) this.deps.cluster?.signals.eventsCommitted(taskId);
    for (const event of events) {
      if (event.seq <= cursor()) continue;
      this.advanceCursor(taskId, event.seq, event.kind === 'terminal');
      this.deps.bus.publish(event);
    }
  }

  private advanceCursor(taskId: string, seq: number, terminal: boolean): void {
    if (!terminal && !this.endedCursors.has(taskId)) {
      this.published.set(taskId, seq);
      return;
    }
    this.published.delete(taskId);
    this.endedCursors.delete(taskId); // re-inserted as the newest
    this.endedCursors.set(taskId, seq);
    if (this.endedCursors.size > MAX_ENDED_CURSORS) {
      const oldest = this.endedCursors.keys().next().value;
      if (oldest !== undefined) this.endedCursors.delete(oldest);
    }
  }
}

/** Validates and canonicalises a submit (throws invalid_input / budget errors); creates nothing. */
function prepareSubmit(req: SubmitRequest, repo: string, deps: Pick<TaskServiceDeps, 'tasksDir' | 'preflightOptions' | 'budget'>) {
  const args = normalizeToolInput(req.workflow, req.arguments);
  const repoDir = validateRepoDir(repo, dirname(deps.tasksDir));
  // The roster serving this task also sets its prompt budgets (models file, context windows).
  const budget = deps.preflightOptions?.(req.options ?? {}) ?? deps.budget;
  const canonicalInput = buildCanonicalInput({ workflow: req.workflow, cwd: repoDir, args });
  const canonicalText = canonicalJson(canonicalInput);
  const canonicalSha = sha256Hex(canonicalText);
  const plan = planBudget(Buffer.byteLength(canonicalText), budget);
  assertForecastWithinBudget(plan);
  return { repoDir, canonicalInput, canonicalText, canonicalSha, plan };
}

/** A task's stored options (validated at submission). */
function optionsOf(task: TaskRecord): TaskOptions {
  try {
    return JSON.parse(task.options) as TaskOptions;
  } catch {
    return {};
  }
}

function snapshotReport(packed: PackedBundle): RepoSnapshotReport {
  return { digest: packed.digest, entries: packed.entries, skipped: packed.skipped };
}

function snapshotJson(packed: PackedBundle): string {
  return canonicalJson(snapshotReport(packed));
}

/** The one answer for a task that does not exist or that the caller may not see (no existence leak). */
export function noSuchTask(taskId: string): FusionError {
  return new FusionError('not_found', `no task with id ${taskId}`, { details: { taskId } });
}

/** One mapping of a full disk to storage_full for every submit path (src/store/storage-full.ts). */
export { asStorageFull, isStorageFull };

/** A task's total wait for space before it fails storage_full, and the backoff between checks. */
export const STORAGE_WAIT_MS = 10 * 60_000;
const STORAGE_BACKOFF_MS = { first: 1_000, max: 5_000 } as const;

/** A task that ran: past `queued` (a resume of it counts against the restart-recovery limit). */
function hasRun(state: TaskState): boolean {
  return state !== 'initializing' && state !== 'queued';
}

function storageFullError(waitedMs: number | undefined, cause?: unknown): FusionError {
  const waited = waitedMs === undefined ? '' : ` for ${Math.round(waitedMs / 1000)} s`;
  return new FusionError('storage_full', `the disk holding the daemon's data stayed full${waited} while the task ran; its committed stages are kept. Free space and submit it again.`, { cause });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}


function validateRepoDir(repo: string, dataDir: string): string {
  const trimmed = repo.trim();
  if (!isAbsolute(trimmed)) {
    throw new FusionError('invalid_input', `repo must be an absolute directory path, got ${JSON.stringify(repo)}`, { details: { field: 'repo' } });
  }
  // The physical path (no symlinks): the sandbox binds exactly this directory and refuses to
  // start when the path names another one by then (docs/security.md#private-repos). The libc
  // realpath is one call where the JavaScript one lstats every component, on the receipt path.
  let repoDir: string | undefined;
  try {
    const real = realpathSync.native(trimmed);
    if (statSync(real).isDirectory()) repoDir = real;
  } catch {
    repoDir = undefined;
  }
  if (repoDir === undefined) throw new FusionError('invalid_input', `repo ${trimmed} is not a readable directory`, { details: { field: 'repo' } });
  // The daemon's own data (other tasks' results, the database) is never a repository to read.
  const data = resolve(dataDir);
  const inside = (a: string, b: string): boolean => a === b || a.startsWith(b.endsWith(sep) ? b : `${b}${sep}`);
  if (inside(repoDir, data) || inside(data, repoDir)) {
    throw new FusionError('invalid_input', `repo ${repoDir} overlaps the daemon's data directory ${data}; choose a repository outside it`, { details: { field: 'repo' } });
  }
  return repoDir;
}

async function settleWithin(p: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p, new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}

export const toolNameOf = (w: Workflow): string => TOOL_NAMES[w];

function receiptOf(workflow: Workflow, task: TaskRecord, requestSha256: string, canonicalInputSha256: string): Receipt {
  return {
    taskId: task.id,
    workflow,
    state: task.state,
    createdAt: task.createdAt,
    requestSha256,
    canonicalInputSha256,
    text: receiptText(workflow, task.id),
  };
}
