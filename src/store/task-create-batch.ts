/**
 * New tasks written in batches: every `createTask` that arrives while the batch before it waits
 * for its commit joins one batch, and a batch is one member of the store's group commit
 * (sqlite-db.ts) that inserts all its tasks with one multi-row statement per table.
 *
 * Why: on SQLite each statement is a round trip through the thread pool, and each round trip
 * waits for a turn of the event loop, which a flood of submits keeps busy parsing requests. Per
 * task that was two to six turns; per batch it is now two to four, whatever its size, so a
 * receipt waits for its commit, not for the turns of every task ahead of it.
 *
 * PostgreSQL commits concurrent statements on their own connections (nothing waits for a turn),
 * and a failed statement aborts its whole transaction there: each task is one statement of its own
 * (insertTaskAlone).
 *
 * A batch whose statement fails on a constraint (a duplicate id) is inserted again task by task,
 * each in its own savepoint, so only the offending task is refused (SQLite: a failed statement
 * leaves its transaction as it was). Any other failure fails the
 * batch's callers, as the group commit fails its members: none of their rows were committed.
 */
import { canonicalJson } from '../contracts/canonical.js';
import type { NewTask, TaskRecord } from './port.js';
import type { SqlDb, SqlExecutor, SqlParam } from './sql-port.js';
import { constraintOf } from './sql-port.js';

/** Bound on one batch, so its statements stay well under SQLite's limit on bound values. */
const MAX_BATCH = 128;

type Outcome = { ok: true; task: TaskRecord } | { ok: false; err: unknown };

interface Pending {
  task: NewTask;
  resolve: (task: TaskRecord) => void;
  reject: (err: unknown) => void;
}

export class TaskCreateBatcher {
  /** The batch still taking tasks: it closes when its member of the group commit starts. */
  private open: Pending[] | undefined;

  constructor(private readonly db: SqlDb, private readonly now: () => string) {}

  create(task: NewTask): Promise<TaskRecord> {
    if (this.db.engine === 'postgres') return insertTaskAlone(this.db, task, this.now());
    return new Promise<TaskRecord>((resolve, reject) => {
      const pending: Pending = { task, resolve, reject };
      if (this.open !== undefined && this.open.length < MAX_BATCH) {
        this.open.push(pending);
        return;
      }
      const batch: Pending[] = [pending];
      this.open = batch;
      // The member may run twice (the group commit's careful pass): it closes the batch and
      // computes its outcomes from the batch alone, so a second run does the same.
      this.db.groupTransaction((tx) => {
        if (this.open === batch) this.open = undefined;
        return insertBatch(tx, batch.map((p) => p.task), this.now());
      }).then(
        (outcomes) => outcomes.forEach((o, i) => (o.ok ? batch[i]!.resolve(o.task) : batch[i]!.reject(o.err))),
        (err: unknown) => {
          if (this.open === batch) this.open = undefined;
          for (const p of batch) p.reject(err);
        },
      );
    });
  }
}

async function insertBatch(tx: SqlExecutor, tasks: readonly NewTask[], at: string): Promise<Outcome[]> {
  try {
    return (await insertTasks(tx, tasks, at)).map((task) => ({ ok: true, task }));
  } catch (err) {
    // A constraint leaves the transaction as it was before the statement: retry one by one.
    if (tasks.length === 1 || constraintOf(err) === undefined) throw err;
  }
  const outcomes: Outcome[] = [];
  for (const task of tasks) {
    await tx.exec('SAVEPOINT create_task');
    try {
      const [created] = await insertTasks(tx, [task], at);
      await tx.exec('RELEASE create_task');
      outcomes.push({ ok: true, task: created! });
    } catch (err) {
      if (constraintOf(err) === undefined) throw err;
      await tx.exec('ROLLBACK TO create_task');
      await tx.exec('RELEASE create_task');
      outcomes.push({ ok: false, err });
    }
  }
  return outcomes;
}

const values = (rows: number, columns: number): string =>
  Array.from({ length: rows }, () => `(${Array.from({ length: columns }, () => '?').join(', ')})`).join(', ');

interface Statement {
  sql: string;
  params: SqlParam[];
}

/** The statements that store `tasks`: their bundles, rows, creation events and checkpoints, one per table. */
function taskStatements(tasks: readonly NewTask[], at: string): Statement[] {
  const statements: Statement[] = [];
  // A bundle is stored once per digest: a second task over the same tree names the same row.
  const bundles = new Map<string, Buffer>();
  for (const t of tasks) if (t.bundle !== undefined) bundles.set(t.bundle.digest, t.bundle.data);
  if (bundles.size > 0) {
    statements.push({
      sql: `INSERT INTO repo_bundles (digest, data, bytes, created_at) VALUES ${values(bundles.size, 4)} ON CONFLICT (digest) DO NOTHING`,
      params: [...bundles].flatMap(([digest, data]) => [digest, data, data.length, at]),
    });
  }
  statements.push({
    sql: `INSERT INTO tasks (id, workflow, state, repo_dir, canonical_input, canonical_input_sha256, budget_plan, options,
       created_at, updated_at, caller_uid, bundle_digest, caller_gid, caller_groups) VALUES ${values(tasks.length, 14)}`,
    params: tasks.flatMap((t): SqlParam[] => [t.id, t.workflow, stateOf(t), t.repoDir, t.canonicalInput, t.canonicalInputSha256, t.budgetPlan,
      canonicalJson(t.options), at, at, t.callerUid, t.bundle?.digest ?? null, t.callerGid ?? null, t.callerGroups == null ? null : JSON.stringify(t.callerGroups)]),
  });
  // The creation events: initializing, and queued for a task that must wait for a run slot.
  const events = tasks.flatMap((t) => [
    [t.id, JSON.stringify({ from: null, to: 'initializing' })],
    ...(t.queued === true ? [[t.id, JSON.stringify({ from: 'initializing', to: 'queued' })]] : []),
  ]);
  statements.push({
    sql: `INSERT INTO task_events (task_id, at, kind, data) VALUES ${values(events.length, 4)}`,
    params: events.flatMap(([id, data]) => [id!, at, 'transition', data!]),
  });
  // One commit for the receipt: a checkpoint known at submission does not cost a second one.
  const checkpoints = tasks.flatMap((t) => (t.checkpoints ?? []).map((ck) => [t.id, ck.key, ck.value]));
  if (checkpoints.length > 0) {
    statements.push({
      sql: `INSERT INTO checkpoints (task_id, key, value) VALUES ${values(checkpoints.length, 3)}
       ON CONFLICT (task_id, key) DO UPDATE SET value = excluded.value`,
      params: checkpoints.flat(),
    });
  }
  return statements;
}

const stateOf = (t: NewTask): TaskRecord['state'] => (t.queued === true ? 'queued' : 'initializing');

/** The records of `tasks` as just inserted: no read-back on the receipt's critical path. */
function createdRecords(tasks: readonly NewTask[], at: string): TaskRecord[] {
  return tasks.map((task) => {
    const { bundle, checkpoints: _checkpoints, queued: _queued, ...fields } = task;
    return {
      ...fields, callerGid: task.callerGid ?? null, callerGroups: task.callerGroups ?? null, bundleDigest: bundle?.digest ?? null,
      state: stateOf(task), createdAt: at, updatedAt: at, error: null, usage: null, usageDelivered: false, resumeCount: 0,
    };
  });
}

/** Inserts `tasks` inside the caller's transaction, one statement per table. */
async function insertTasks(tx: SqlExecutor, tasks: readonly NewTask[], at: string): Promise<TaskRecord[]> {
  for (const { sql, params } of taskStatements(tasks, at)) await tx.run(sql, params);
  return createdRecords(tasks, at);
}

/**
 * PostgreSQL: the task's statements as one statement of data-modifying WITH clauses, committed
 * on its own: one round trip instead of BEGIN, three or four inserts and COMMIT. The foreign keys
 * (events and checkpoints name the task, the task its bundle) are checked at the statement's end,
 * when every clause has run; a failing clause fails the whole statement and stores nothing.
 */
async function insertTaskAlone(db: SqlDb, task: NewTask, at: string): Promise<TaskRecord> {
  const statements = taskStatements([task], at);
  const sql = `WITH ${statements.map((st, i) => `s${i} AS (${st.sql})`).join(', ')} SELECT 1 AS created`;
  await db.run(sql, statements.flatMap((st) => st.params));
  return createdRecords([task], at)[0]!;
}
