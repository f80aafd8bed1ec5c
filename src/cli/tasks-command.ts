/**
 * `fusion tasks [--state S] [--limit N] [--json] [--watch]`: the caller's tasks, newest first,
 * as a table (id, state, age, duration, objective, caller); `--json` is the daemon's reply as
 * it is. `--watch` redraws the table whenever one of the tasks changes (and every few seconds
 * for the ages) until interrupted.
 */
import type { FusionClient } from '../client/index.js';
import { formatDuration } from '../client/task-progress.js';
import { flag, has, usageError, type FlagSpec, type ParsedArgs } from '../config/args.js';
import { isTaskState, TASK_STATES } from '../contracts/task-state.js';
import type { Io } from './commands.js';
import { renderTable, type Column } from './output/table.js';
import { userNameOf } from './output/users.js';

export const TASKS_FLAGS: Record<string, FlagSpec> = { state: { value: true }, limit: { value: true }, watch: {} };

/** How often `--watch` redraws when nothing changed (the age column moves on). */
const WATCH_REFRESH_MS = 5_000;

interface TaskRow {
  taskId: string;
  workflow?: string;
  state: string;
  status?: string;
  createdAt: string;
  updatedAt: string;
  objective?: string | null;
  callerUid?: number | null;
  error?: { code: string } | null;
}

interface TasksReply {
  tasks: TaskRow[];
  truncated?: boolean;
}

const COLUMNS: Column[] = [
  { header: 'ID' },
  { header: 'STATE' },
  { header: 'AGE' },
  { header: 'DURATION' },
  { header: 'OBJECTIVE', flexible: true, min: 16 },
  { header: 'CALLER' },
];

/** One task as table cells; a running task's duration so far ends in "+". */
export function taskCells(t: TaskRow, now: number): string[] {
  const created = Date.parse(t.createdAt);
  const running = (t.status ?? 'running') === 'running';
  const duration = running ? `${formatDuration(now - created)}+` : formatDuration(Date.parse(t.updatedAt) - created);
  // The code only when it says more than the state (`failed: sandbox_unavailable`, not `cancelled: cancelled`).
  const state = t.error && t.error.code !== t.state ? `${t.state}: ${t.error.code}` : t.state;
  return [t.taskId, state, `${formatDuration(now - created)} ago`, duration, t.objective ?? '', userNameOf(t.callerUid)];
}

export function tasksTable(tasks: readonly TaskRow[], now: number, width: number): string {
  if (tasks.length === 0) return 'no tasks\n';
  return renderTable(COLUMNS, tasks.map((t) => taskCells(t, now)), width);
}

function queryOf(args: ParsedArgs): string {
  const q = new URLSearchParams();
  const state = flag(args, 'state');
  const limit = flag(args, 'limit');
  if (state !== undefined && !isTaskState(state)) throw usageError(`--state must be one of ${TASK_STATES.join(', ')}; got ${JSON.stringify(state)}`);
  if (limit !== undefined && (!/^\d+$/u.test(limit) || Number(limit) < 1 || Number(limit) > 1000)) throw usageError(`--limit must be a whole number from 1 to 1000, got ${JSON.stringify(limit)}`);
  if (state !== undefined) q.set('state', state);
  if (limit !== undefined) q.set('limit', limit);
  return q.toString();
}

export interface TasksOutput extends Io {
  /** Terminal width (stdout's columns when it is a terminal; 160 otherwise). */
  columns?: number;
  /** True when stdout is a terminal: --watch redraws in place instead of appending tables. */
  tty?: boolean;
}

export async function tasksCommand(args: ParsedArgs, client: FusionClient, io: TasksOutput): Promise<number> {
  const query = queryOf(args);
  const json = has(args, 'json');
  const show = async (): Promise<void> => {
    const reply = (await client.callRoute('taskList', {}, { query })) as TasksReply;
    if (json) io.stdout(`${JSON.stringify(reply, null, 2)}\n`);
    else io.stdout(tasksTable(reply.tasks, Date.now(), io.columns ?? 160));
    // A cut list says so, and how to see more (on stderr: stdout stays the list).
    if (reply.truncated === true) io.stderr(`(showing the newest ${reply.tasks.length === 1 ? 'task' : `${reply.tasks.length} tasks`}; more exist: raise --limit (up to 1000) or narrow with --state STATE)\n`);
  };
  if (!has(args, 'watch')) {
    await show();
    return 0;
  }
  return watch(client, io, show);
}

/** Redraws on every event of the caller's tasks (coalesced) and every WATCH_REFRESH_MS; ends when the daemon does. */
async function watch(client: FusionClient, io: TasksOutput, show: () => Promise<void>): Promise<number> {
  let drawing = Promise.resolve();
  let queued = false;
  let failure: unknown;
  const redraw = (): void => {
    if (queued) return;
    queued = true;
    drawing = drawing.then(async () => {
      queued = false;
      if (io.tty === true) io.stdout('\x1b[H\x1b[2J');
      await show();
      if (io.tty !== true) io.stdout('\n');
    }).catch((err: unknown) => {
      failure ??= err;
    });
  };
  const stream = client.allEvents()[Symbol.asyncIterator]();
  // Asked for before the first draw; a change the stream missed meanwhile is drawn by the periodic redraw.
  const first = stream.next();
  redraw();
  const timer = setInterval(redraw, WATCH_REFRESH_MS);
  try {
    for (let next = await first; next.done !== true && failure === undefined; next = await stream.next()) redraw();
    await drawing;
    if (failure !== undefined) throw failure;
    io.stderr('fusion tasks --watch: the daemon closed the event stream\n');
    return 3;
  } finally {
    clearInterval(timer);
    await stream.return?.(undefined);
  }
}
