/**
 * An in-memory fake of the `Store` port for unit tests of the task layer and the routes: the
 * same compare-and-set transitions (through the one transition table) and event log, no SQLite,
 * no daemon. Methods the tests do not need throw, so a test that starts relying on one notices.
 */
import { assertTransition, isTerminal, type TaskState } from '../../../src/contracts/task-state.js';
import { TaskUsageSchema } from '../../../src/contracts/task-usage.js';
import { parseStored } from '../../../src/store/rows.js';
import type { NewTask, RepoBundleRecord, ResultRecord, Store, TaskEvent, TaskEventKind, TaskRecord, TransitionPatch } from '../../../src/store/port.js';

export interface MemoryStore extends Store {
  tasks: Map<string, TaskRecord>;
  results: Map<string, ResultRecord>;
  events: TaskEvent[];
  /** Fails the next createTask with this error (a full disk, …). */
  failNextCreate?: Error;
  /** Task ids whose running attempts were closed (closeRunningAttempts), in call order. */
  closedAttempts: string[];
}

export function memoryStore(): MemoryStore {
  const tasks = new Map<string, TaskRecord>();
  const results = new Map<string, ResultRecord>();
  const events: TaskEvent[] = [];
  let seq = 0;
  const now = (): string => new Date().toISOString();
  const append = (taskId: string, kind: TaskEventKind, data: Record<string, unknown>): TaskEvent => {
    const event = { seq: ++seq, taskId, at: now(), kind, data };
    events.push(event);
    return event;
  };
  const move = (id: string, from: TaskState, to: TaskState, patch: TransitionPatch = {}): TaskRecord | null => {
    assertTransition(from, to);
    const task = tasks.get(id);
    if (!task || task.state !== from) return null;
    const next: TaskRecord = { ...task, state: to, updatedAt: now(), ...(patch.error ? { error: patch.error } : {}), ...(patch.usage ? { usage: parseStored(TaskUsageSchema, patch.usage, 'task usage', id) } : {}), ...(patch.bundleDigest !== undefined && task.bundleDigest === null ? { bundleDigest: patch.bundleDigest } : {}) };
    tasks.set(id, next);
    append(id, 'transition', { from, to, ...patch.eventData });
    if (isTerminal(to)) append(id, 'terminal', { state: to });
    return next;
  };
  const missing = (name: string) => (): never => {
    throw new Error(`memoryStore: ${name} is not faked`);
  };
  const bundles = new Map<string, RepoBundleRecord>();
  const checkpoints = new Map<string, string>();
  const store: MemoryStore = {
    tasks,
    results,
    events,
    closedAttempts: [],
    init: async () => undefined,
    close: async () => undefined,
    async createTask(t: NewTask) {
      if (store.failNextCreate) {
        const err = store.failNextCreate;
        delete store.failNextCreate;
        throw err;
      }
      const at = now();
      const { bundle, checkpoints: _checkpoints, queued, ...fields } = t;
      if (bundle !== undefined) bundles.set(bundle.digest, { digest: bundle.digest, data: bundle.data, bytes: bundle.data.length, createdAt: at });
      const task: TaskRecord = { ...fields, bundleDigest: bundle?.digest ?? null, state: queued === true ? 'queued' : 'initializing', createdAt: at, updatedAt: at, error: null, usage: null, usageDelivered: false, resumeCount: 0 };
      tasks.set(t.id, task);
      append(t.id, 'transition', { to: 'initializing' });
      if (queued === true) append(t.id, 'transition', { from: 'initializing', to: 'queued' });
      return task;
    },
    getTask: async (id) => tasks.get(id) ?? null,
    getRepoBundle: async (digest) => bundles.get(digest) ?? null,
    listLiveBundleDigests: async () => new Set([...tasks.values()].filter((t) => !isTerminal(t.state) && t.bundleDigest !== null).map((t) => t.bundleDigest!)),
    async pruneRepoBundles(beforeIso) {
      const live = new Set([...tasks.values()].filter((t) => !isTerminal(t.state)).map((t) => t.bundleDigest));
      let n = 0;
      for (const [digest, b] of bundles) {
        if (b.createdAt < beforeIso && !live.has(digest)) {
          bundles.delete(digest);
          n++;
        }
      }
      return n;
    },
    listTasks: async () => [...tasks.values()],
    listNonTerminalTasks: async () => [...tasks.values()].filter((t) => !isTerminal(t.state)),
    transitionTask: async (id, from, to, patch) => move(id, from, to, patch),
    appendEvent: async (taskId, kind, data) => append(taskId, kind, data),
    listEvents: async (taskId, afterSeq = 0) => events.filter((e) => e.taskId === taskId && e.seq > afterSeq),
    async incrementResumeCount(id) {
      const task = tasks.get(id)!;
      tasks.set(id, { ...task, resumeCount: task.resumeCount + 1 });
      return task.resumeCount + 1;
    },
    async saveUsage(id, usage) {
      tasks.set(id, { ...tasks.get(id)!, usage: parseStored(TaskUsageSchema, usage, 'task usage', id) });
    },
    async claimUsageDelivery(id) {
      const task = tasks.get(id)!;
      if (task.usageDelivered) return false;
      tasks.set(id, { ...task, usageDelivered: true });
      return true;
    },
    async commitResult(result, patch) {
      const next = move(result.taskId, 'merging', 'completed', patch);
      if (next) results.set(result.taskId, result);
      return next;
    },
    getResult: async (taskId) => results.get(taskId) ?? null,
    listUnsealedTerminalTasks: async () => [],
    listUnsignedTaskTarballs: async () => [],
    countTasksByState: async () => {
      const counts: Record<string, number> = {};
      for (const t of tasks.values()) counts[t.state] = (counts[t.state] ?? 0) + 1;
      return counts;
    },
    async saveCheckpoint(taskId, key, value) {
      checkpoints.set(`${taskId}\0${key}`, value);
    },
    dropSealedCheckpoints: missing('dropSealedCheckpoints'),
    getCheckpoint: async (taskId, key) => checkpoints.get(`${taskId}\0${key}`) ?? null,
    startAttempt: missing('startAttempt'),
    finishAttempt: missing('finishAttempt'),
    async closeRunningAttempts(taskId) {
      store.closedAttempts.push(taskId);
      return 0;
    },
    listAttempts: async () => [],
    saveTaskTarball: missing('saveTaskTarball'),
    getTaskTarball: async () => null,
    listTerminalTasksBefore: missing('listTerminalTasksBefore'),
    deleteTerminalTask: missing('deleteTerminalTask'),
    backupTo: missing('backupTo'),
  };
  return store;
}
