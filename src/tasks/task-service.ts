/**
 * The task layer's facade: durable preflight and receipts, dispatch, cancel, restart recovery.
 * Its roles live beside it: intake (intake.ts: everything that can reject a submit),
 * admission (admission.ts: the waiting bounds), a run's pieces (task-run.ts), events
 * (task-events.ts: committed events to waiting clients) and cluster mode (cluster-bridge.ts).
 *
 * Durability rule: the receipt is returned only after the task row, the canonical input and
 * the budget plan are committed (fsynced files + a committed SQLite transaction). Everything
 * that can reject the input runs before anything is created (docs/behaviour.md#a8).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../log.js';
import { FusionError, toFusionError } from '../errors.js';
import { TOOL_NAMES, type Workflow } from '../contracts/constants.js';
import { canonicalJson } from '../contracts/canonical.js';
import type { Receipt } from '../contracts/api.js';
import type { TaskOptions } from '../contracts/task-options.js';
import { INTERRUPTED_ATTEMPT_DETAIL, type ListTasksQuery, type Store, type TaskEvent, type TaskRecord, type TransitionPatch } from '../store/port.js';
import { isTerminal } from '../contracts/task-state.js';
import type { TaskEventBus } from './event-bus.js';
import type { Dispatcher } from './dispatcher.js';
import type { QueuedRun } from './cluster-port.js';
import type { TaskRunner } from './runner-port.js';
import type { BudgetConfig } from '../contracts/budget.js';
import { taskPaths } from './paths.js';
import { asStorageFull, isStorageFull } from '../store/storage-full.js';
import { mkdirDurable, writeFileDurable } from '../common/durable-fs.js';
import type { RepoAccessCheck } from './repo-access.js';
import type { PackedBundle } from '../bundles/pack.js';
import type { DeliveryMode } from '../contracts/api.js';
import { completedNothingRead, readAnswerBytes, readBgResult, type BgResult, type ResultReadOptions } from './result-reader.js';
import type { NothingRead } from './nothing-read.js';
import { Admission } from './admission.js';
import { TaskEventPublisher } from './task-events.js';
import { ClusterBridge, type Cluster } from './cluster-bridge.js';
import { packAtSubmit, prepareSubmit, receiptOf, repoAsCaller, snapshotJson, type PreparedSubmit, type SubmitRequest } from './intake.js';
import {
  SNAPSHOT_CHECKPOINT, STORAGE_BACKOFF_MS, STORAGE_WAIT_MS, hasRun, repositoryFor, settleWithin, sleep, storageFullError, taskControl, waitForSpace, writeTaskFiles,
  type RepoBundles,
} from './task-run.js';

export type { SubmitRequest } from './intake.js';
export type { RepoBundles } from './task-run.js';
export { SNAPSHOT_CHECKPOINT, STORAGE_WAIT_MS } from './task-run.js';
export { MAX_ENDED_CURSORS } from './task-events.js';

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
  cluster?: Cluster;
  /**
   * Repository snapshots (docs/operations.md#repository-snapshots): the repository is packed as
   * the caller into a bundle and the task runs over its verified, unpacked, root-owned tree,
   * never the submitter's path. With `cluster` it is packed at submission and stored with the
   * task (any daemon may run it); on a single host it is packed when the run starts (`install`),
   * and a resumed run reuses the tree it started over.
   */
  bundles?: RepoBundles;
}

type AbortReason = 'cancel' | 'shutdown';

/** The checks a result read runs (the signed tarball's seal, the attempts' records). */
export type ResultChecks = Pick<ResultReadOptions, 'sealCheck' | 'attemptCheck'>;

/** How a task's run starts: a resume continues from its last committed stage boundary. */
interface RunStart {
  resume: boolean;
  /** Called when the run takes its slot (gives back the task's waiting place). */
  onStart?: () => void;
}

export class TaskService {
  /** This daemon's runs; `unadmit` gives back the task's waiting place (idempotent; also done when it starts). */
  private readonly controllers = new Map<string, { ac: AbortController; settled: Promise<void>; started: boolean; unadmit: () => void }>();
  private accepting = true;
  /** Set when the daemon started on a full disk: why nothing is accepted. */
  private readOnlyReason: string | undefined;
  private readonly log: Logger;
  /** Per task: the pending `initializing → queued` write, awaited before the task starts. */
  private readonly admission: Admission;
  private readonly events: TaskEventPublisher;
  private readonly clusterBridge: ClusterBridge | undefined;

  constructor(private readonly deps: TaskServiceDeps) {
    this.log = deps.log.child({ component: 'tasks' });
    this.admission = new Admission(deps.admission);
    this.events = new TaskEventPublisher(deps.store, deps.bus, deps.cluster?.signals);
    this.clusterBridge = deps.cluster === undefined ? undefined : new ClusterBridge(deps.cluster, {
      store: deps.store,
      log: this.log,
      maxResumes: deps.maxResumes ?? 1,
      accepting: () => this.accepting,
      fail: (taskId, err) => this.fail(taskId, err),
      publish: (taskId) => this.publish(taskId),
      publishRemote: (taskId) => this.events.publishRemote(taskId),
      run: (task, ac, how) => this.runTracked(task, ac, how),
      abortLocal: (taskId) => this.controllers.get(taskId)?.ac.abort('cancel' satisfies AbortReason),
    });
  }

  get bus(): TaskEventBus {
    return this.deps.bus;
  }

  async submit(req: SubmitRequest): Promise<Receipt> {
    if (!this.accepting) throw new FusionError('shutting_down', 'the daemon is shutting down and accepts no new tasks; retry after it restarts');
    // 1. The cheap refusals first, so a flood is shed at O(1) per submit (no canonicalisation):
    //    no receipt when the commit could not be durable, nor when too many tasks already wait.
    if (this.readOnlyReason !== undefined) throw new FusionError('storage_full', `${this.readOnlyReason}; no task was accepted`, { details: { readOnly: true, retryAfterSeconds: 60 } });
    this.deps.assertStorage?.();
    // Cluster mode: the shared queue holds waiting tasks (not this daemon), so it has no local bound.
    const release = this.clusterBridge === undefined ? this.admission.admit(req.caller ?? 'local') : () => undefined;
    // 2. Everything that can reject the request, before anything exists.
    let prepared: PreparedSubmit;
    let bundle: PackedBundle | undefined;
    try {
      prepared = prepareSubmit(req, await repoAsCaller(req, this.deps), this.deps);
      // Cluster mode: the repository travels with the task (read as the caller, like the check).
      if (this.clusterBridge !== undefined && this.deps.bundles !== undefined) bundle = await packAtSubmit(req, prepared.repoDir, this.deps.bundles, this.deps);
    } catch (err) {
      release();
      throw err;
    }
    const { repoDir, canonicalInput, canonicalText, canonicalSha, plan } = prepared;

    // 3. Durable preflight: one committed SQLite transaction holds the task row with its
    //    canonical input and budget plan (synchronous=FULL). The task directory's copies are
    //    written when the task starts: they are conveniences, not the record.
    const taskId = `${req.workflow}-${randomBytes(16).toString('hex')}`;
    // A task that must wait for a run slot is created queued, in the same commit (cluster mode:
    // the shared queue decides, and the task stays initializing until a daemon takes it). Ahead of
    // it: the running tasks and every other admitted one not started yet, those still in their
    // own commit included (the admission reserved this one's place too).
    const queued = this.clusterBridge === undefined && this.admission.mustWait(this.deps.dispatcher.running, this.admission.waitingCount - 1);
    let task: TaskRecord;
    try {
      task = await this.deps.store.createTask({
        ...(queued ? { queued } : {}),
        id: taskId,
        workflow: req.workflow,
        repoDir,
        canonicalInput: canonicalText,
        canonicalInputSha256: canonicalSha,
        budgetPlan: canonicalJson(plan),
        options: prepared.options,
        callerUid: req.identity?.uid ?? null,
        callerGid: req.identity?.gid ?? null,
        callerGroups: req.identity?.groups ?? null,
        ...(bundle !== undefined ? {
          bundle: { digest: bundle.digest, data: bundle.data },
          checkpoints: [{ key: SNAPSHOT_CHECKPOINT, value: snapshotJson(bundle) }],
        } : {}),
      });
    } catch (err) {
      release();
      throw asStorageFull(err);
    }
    // Waiters learn of the new task on the next turn; the receipt does not wait for them. With no
    // one listening yet (the usual case: only this receipt will tell anyone the id), the read is
    // left to the task's next publish, which starts from the same cursor: one store read fewer
    // per receipt, queued ahead of the next group commit. The cluster always hears of it.
    setImmediate(() => {
      if (this.clusterBridge === undefined && !this.deps.bus.listening(taskId)) return;
      void this.publish(taskId).catch(() => undefined);
    });
    this.log.info({ taskId, workflow: req.workflow, state: task.state, ...(bundle !== undefined ? { bundleDigest: bundle.digest, bundleBytes: bundle.data.length, bundleSkipped: bundle.skipped } : {}) }, 'task accepted');

    // 4. Only now is anything started. Cluster mode: the job is in the shared queue before the
    //    receipt is returned (a task without its job would wait for nobody).
    if (this.clusterBridge !== undefined) {
      await this.clusterBridge.enqueueOrFail(task);
      return receiptOf(req.workflow, task, canonicalInput.request.sha256, canonicalSha);
    }
    this.start(task, { resume: false, onStart: release });
    return receiptOf(req.workflow, task, canonicalInput.request.sha256, canonicalSha);
  }

  /** Cluster mode: runs a task this daemon's worker took from the shared queue (cluster-bridge.ts). */
  async runQueued(job: QueuedRun): Promise<void> {
    await this.clusterBridge?.runQueued(job);
  }

  /** Cluster mode, at start-up: every unfinished task gets its queue job again. */
  async requeueUnfinished(): Promise<number> {
    return (await this.clusterBridge?.requeueUnfinished()) ?? 0;
  }

  /** Cluster mode: another daemon committed events of `taskId`; feed them to the local waiters. */
  remoteEvents(taskId: string): void {
    this.clusterBridge?.remoteEvents(taskId);
  }

  /** Cluster mode: another daemon cancelled `taskId`; stop the local run, if this daemon has it. */
  remoteCancel(taskId: string): void {
    this.clusterBridge?.remoteCancel(taskId);
  }

  async get(taskId: string): Promise<TaskRecord> {
    const task = await this.deps.store.getTask(taskId);
    if (!task) throw noSuchTask(taskId);
    return task;
  }

  /** The task, or null when there is none (no error: for filters that only ask). */
  find(taskId: string): Promise<TaskRecord | null> {
    return this.deps.store.getTask(taskId);
  }

  /** Tasks by the query's filters, newest first. */
  list(query: ListTasksQuery): Promise<TaskRecord[]> {
    return this.deps.store.listTasks(query);
  }

  /** The task's committed events after `afterSeq` (0: all), in order. */
  eventsAfter(taskId: string, afterSeq: number): Promise<TaskEvent[]> {
    return this.deps.store.listEvents(taskId, afterSeq);
  }

  /** A terminal task's result (result-reader.ts), with this daemon's copy of its answer file. */
  readResult(task: TaskRecord, delivery: DeliveryMode, checks: ResultChecks): Promise<BgResult> {
    return readBgResult(this.deps.store, task, delivery, this.readOptions(checks));
  }

  /** Whether a completed task read none of its sources or files (nothing-read.ts); null otherwise. */
  nothingRead(task: TaskRecord): Promise<NothingRead | null> {
    return completedNothingRead(this.deps.store, task);
  }

  /** A completed task's answer bytes, checked against the committed digest. */
  readAnswer(task: TaskRecord, checks: ResultChecks): Promise<{ answer: Buffer; sha256: string }> {
    return readAnswerBytes(this.deps.store, task, this.readOptions(checks));
  }

  private readOptions(checks: ResultChecks): ResultReadOptions {
    return { ...checks, materialise: (taskId, answer) => this.materialiseAnswer(taskId, answer), answerFileHere: (taskId) => this.answerFileHere(taskId) };
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
      await this.publish(taskId);
      this.log.info({ taskId, from: task.state }, 'task cancelled');
      const entry = this.controllers.get(taskId);
      // Running (or queued) elsewhere in the cluster.
      if (!entry && this.clusterBridge !== undefined) await this.clusterBridge.cancelElsewhere(taskId);
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
        await this.publish(task.id);
        this.log.info({ taskId: task.id, state: task.state }, 'starting a task that had not run before the restart');
        this.start(task, { resume: false });
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
      await this.publish(task.id);
      this.log.warn({ taskId: task.id, state: task.state }, 'resuming task after restart');
      this.start({ ...task, resumeCount: task.resumeCount + 1 }, { resume: true });
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

  /** Hands the task to this daemon's dispatcher. */
  private start(task: TaskRecord, how: RunStart): void {
    const onStart = how.onStart ?? ((): void => undefined);
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
        await this.runTask(task, ac, { resume: how.resume });
      } finally {
        this.admission.ranFor(Date.now() - started);
        this.controllers.delete(task.id);
        release();
      }
    });
  }

  /** Runs a task outside the dispatcher (a cluster queue job), tracked as this daemon's run until it settled. */
  private async runTracked(task: TaskRecord, ac: AbortController, how: { resume: boolean }): Promise<void> {
    let release!: () => void;
    const settled = new Promise<void>((r) => (release = r));
    this.controllers.set(task.id, { ac, settled, started: true, unadmit: () => undefined });
    try {
      await this.runTask(task, ac, how);
    } finally {
      this.controllers.delete(task.id);
      release();
    }
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
    if (this.clusterBridge !== undefined) return;
    const refusal = this.admission.refusal(caller ?? 'local');
    if (refusal !== undefined) throw refusal;
  }


  /** Read-only mode (a start on a full disk): every submit is refused with storage_full and this reason. */
  setReadOnly(reason: string): void {
    this.readOnlyReason = reason;
  }

  /** Tasks waiting for a run slot now (health, metrics). */
  get waitingCount(): number {
    return this.admission.waitingCount;
  }

  private async runTask(task: TaskRecord, ac: AbortController, how: { resume: boolean }): Promise<void> {
    const waitMs = this.deps.storageWaitMs ?? STORAGE_WAIT_MS;
    const waitUntil = Date.now() + waitMs;
    let backoff: number = STORAGE_BACKOFF_MS.first;
    let resume = how.resume;
    for (;;) {
      const err = await this.runOnce(task, ac, { resume });
      if (err === undefined) return;
      if (!isStorageFull(err) || ac.signal.aborted) return this.failRun(task.id, ac, err);
      // A full disk is a state, not a bug (docs/behaviour.md#b13, storage_full): the run is set
      // aside, waits (backoff) for space and resumes from its committed checkpoints; a task
      // whose disk stays full past the wait fails storage_full.
      if (Date.now() >= waitUntil) return this.failRun(task.id, ac, storageFullError(waitMs));
      this.log.warn({ taskId: task.id, state: task.state, err: toFusionError(err).message, retryInMs: backoff }, 'the disk is full: the run is set aside until there is space again');
      if (!(await waitForSpace(backoff, waitUntil, ac.signal, () => this.hasSpace()))) {
        if (ac.signal.aborted) return;
        return this.failRun(task.id, ac, storageFullError(waitMs));
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

  /** Whether the data directory's disk has its reserve free again. */
  private hasSpace(): boolean {
    try {
      this.deps.assertStorage?.();
      return true;
    } catch {
      return false;
    }
  }

  /** One run of the task; returns what stopped it, or undefined when it ended (or was stopped on purpose). */
  private async runOnce(task: TaskRecord, ac: AbortController, how: { resume: boolean }): Promise<unknown> {
    let release = (): void => undefined;
    try {
      if (ac.signal.aborted) return undefined;
      // The task runs over its snapshot (bundle_changed / repo_snapshot_missing fail it before anything runs).
      const repo = await repositoryFor(task, ac.signal, {
        store: this.deps.store, bundles: this.deps.bundles, clustered: this.deps.cluster !== undefined, daemonUid: this.deps.daemonUid ?? process.getuid?.() ?? 0, log: this.log,
      });
      release = repo.release;
      const control = taskControl(task, repo.pending, {
        store: this.deps.store, publish: (id) => this.publish(id), get: (id) => this.get(id), terminalHook: (id) => this.terminalHook(id), log: this.log,
      });
      await writeTaskFiles(this.deps.tasksDir, task);
      // A cancel or a drain that came while the bundle was checked out (a fetch, an unpack, a
      // flush): the runner would only see an abort signal fire, and this one already has.
      if (ac.signal.aborted) return undefined;
      await this.deps.runner.run({ task: { ...task, repoDir: repo.repoDir }, control, signal: ac.signal, resume: how.resume, ...(repo.report !== undefined ? { repository: repo.report } : {}) });
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
        await this.publish(taskId);
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

  /** Publishes the task's committed events the bus has not seen yet (task-events.ts). */
  private publish(taskId: string): Promise<void> {
    return this.events.publishNew(taskId);
  }
}

/** The one answer for a task that does not exist or that the caller may not see (no existence leak). */
export function noSuchTask(taskId: string): FusionError {
  return new FusionError('not_found', `no task with id ${taskId}`, { details: { taskId } });
}

/** One mapping of a full disk to storage_full for every submit path (src/store/storage-full.ts). */
export { asStorageFull, isStorageFull };

export const toolNameOf = (w: Workflow): string => TOOL_NAMES[w];
