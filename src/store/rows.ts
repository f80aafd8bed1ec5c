/**
 * Row shapes of the SQLite tables and their mapping to the port's records. Rows are checked on
 * the way out: a state or workflow this build does not know means a corrupt or foreign store,
 * and is reported as store_error rather than handed on as a lie.
 */
import { FusionError } from '../errors.js';
import { isTaskState } from '../contracts/task-state.js';
import { WORKFLOWS, type Workflow } from '../contracts/constants.js';
import type { z } from 'zod';
import { TaskOptionsSchema } from '../contracts/task-options.js';
import { TaskUsageSchema } from '../contracts/task-usage.js';
import type { AttemptRecord, ResultRecord, TaskError, TaskEvent, TaskEventKind, TaskRecord } from './port.js';

export interface TaskRow {
  id: string;
  workflow: string;
  state: string;
  repo_dir: string;
  canonical_input: string;
  canonical_input_sha256: string;
  budget_plan: string;
  options: string;
  created_at: string;
  updated_at: string;
  error_code: string | null;
  error_message: string | null;
  error_state: string | null;
  usage: string | null;
  usage_delivered: number;
  resume_count: number;
  caller_uid: number | null;
  bundle_digest: string | null;
  caller_gid: number | string | null;
  caller_groups: string | null;
}

export interface EventRow {
  seq: number;
  task_id: string;
  at: string;
  kind: string;
  data: string;
}

export interface AttemptRow {
  task_id: string;
  stage: string;
  attempt: number;
  status: string;
  started_at: string;
  ended_at: string | null;
  detail: string | null;
  tarball_path: string | null;
  tarball_sha256: string | null;
}

export interface ResultRow {
  task_id: string;
  answer_path: string;
  answer_sha256: string;
  answer_bytes: number;
  metadata: string;
  metadata_sha256: string;
  committed_at: string;
  answer_data: Buffer | null;
}

export const TASK_COLUMNS =
  'id, workflow, state, repo_dir, canonical_input, canonical_input_sha256, budget_plan, options, created_at, ' +
  'updated_at, error_code, error_message, error_state, usage, usage_delivered, resume_count, caller_uid, bundle_digest, caller_gid, caller_groups';

function corrupt(what: string, details: Record<string, unknown>): FusionError {
  return new FusionError('store_error', `store holds an invalid ${what}`, { retryable: false, details });
}

function isWorkflow(value: string): value is Workflow {
  return (WORKFLOWS as readonly string[]).includes(value);
}

export function toTaskRecord(row: TaskRow): TaskRecord {
  const { state, workflow } = row;
  if (!isTaskState(state)) throw corrupt('task state', { taskId: row.id, state });
  if (!isWorkflow(workflow)) throw corrupt('task workflow', { taskId: row.id, workflow });
  let error: TaskError | null = null;
  if (row.error_code !== null) {
    const errorState = row.error_state ?? state;
    if (!isTaskState(errorState)) throw corrupt('task error state', { taskId: row.id, state: errorState });
    error = { code: row.error_code, message: row.error_message ?? '', state: errorState };
  }
  return {
    id: row.id,
    workflow,
    state,
    repoDir: row.repo_dir,
    canonicalInput: row.canonical_input,
    canonicalInputSha256: row.canonical_input_sha256,
    budgetPlan: row.budget_plan,
    options: parseStored(TaskOptionsSchema, row.options, 'task options', row.id),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    error,
    usage: row.usage === null ? null : parseStored(TaskUsageSchema, row.usage, 'task usage', row.id),
    usageDelivered: row.usage_delivered === 1,
    resumeCount: row.resume_count,
    callerUid: row.caller_uid,
    bundleDigest: row.bundle_digest,
    callerGid: row.caller_gid === null ? null : Number(row.caller_gid),
    callerGroups: parseGroups(row.caller_groups),
  };
}

/**
 * A JSON column of a task, parsed and checked against its contract: callers get the typed
 * value, never text to cast; what does not parse is reported as store_error.
 */
export function parseStored<S extends z.ZodTypeAny>(schema: S, text: string, what: string, taskId: string): z.infer<S> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new FusionError('store_error', `store holds invalid ${what} (not JSON)`, { cause: err, retryable: false, details: { taskId } });
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw corrupt(what, { taskId, issues: parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`) });
  return parsed.data as z.infer<S>;
}

/** The recorded supplementary groups (JSON array of gids), or null when unknown or unreadable. */
function parseGroups(text: string | null): number[] | null {
  if (text === null) return null;
  try {
    const groups = JSON.parse(text) as unknown;
    return Array.isArray(groups) && groups.every((g) => Number.isSafeInteger(g) && (g as number) >= 0) ? (groups as number[]) : null;
  } catch {
    return null;
  }
}

const EVENT_KINDS: readonly TaskEventKind[] = ['transition', 'progress', 'terminal'];

export function toTaskEvent(row: EventRow): TaskEvent {
  const kind = EVENT_KINDS.find((k) => k === row.kind);
  if (kind === undefined) throw corrupt('event kind', { seq: row.seq, kind: row.kind });
  let data: unknown;
  try {
    data = JSON.parse(row.data);
  } catch (err) {
    throw new FusionError('store_error', 'store holds an invalid event payload', { cause: err, retryable: false, details: { seq: row.seq } });
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data)) throw corrupt('event payload', { seq: row.seq });
  return { seq: row.seq, taskId: row.task_id, at: row.at, kind, data: data as Record<string, unknown> };
}

export function toAttemptRecord(row: AttemptRow): AttemptRecord {
  const status = row.status;
  if (status !== 'running' && status !== 'succeeded' && status !== 'failed') {
    throw corrupt('attempt status', { taskId: row.task_id, stage: row.stage, status });
  }
  return {
    taskId: row.task_id,
    stage: row.stage,
    attempt: row.attempt,
    status,
    startedAt: row.started_at,
    endedAt: row.ended_at,
    detail: row.detail,
    tarballPath: row.tarball_path,
    tarballSha256: row.tarball_sha256,
  };
}

export function toResultRecord(row: ResultRow): ResultRecord {
  return {
    taskId: row.task_id,
    answerPath: row.answer_path,
    answerSha256: row.answer_sha256,
    answerBytes: row.answer_bytes,
    metadata: row.metadata,
    metadataSha256: row.metadata_sha256,
    committedAt: row.committed_at,
    ...(row.answer_data === null ? {} : { answerData: row.answer_data }),
  };
}
