/**
 * What the dashboard pages read (docs/operations.md#dashboard): a read-only port over the
 * daemon's existing services and stores, so the pages hold no SQL and no store knowledge, and
 * tests can render them from plain objects. `createDashboardData` builds it from the running
 * daemon's parts; every method only reads.
 */
import type { Store, TaskRecord, AttemptRecord } from '../store/port.js';
import type { ApiKeyStore, CrawlReport, ResearchDocumentRecord, ResearchRunRecord, ResearchRunStore, ResearchSnapshotRecord } from '../store/research-port.js';
import type { ResultChecks, TaskService } from '../tasks/task-service.js';
import type { TaskState } from '../contracts/task-state.js';
import type { DeliveredCitations } from '../contracts/citations.js';
import type { ResearchLimits } from '../contracts/research-limits.js';
import type { MaintenanceRunRecord } from '../maintenance/scheduler.js';
import { objectiveOf } from '../api/routes.js';
import { toFusionError } from '../errors.js';

export interface TaskRow {
  id: string;
  workflow: string;
  state: TaskState;
  createdAt: string;
  updatedAt: string;
  callerUid: number | null;
  objective: string | null;
  error: { code: string; message: string } | null;
}

export interface AttemptRow {
  stage: string;
  attempt: number;
  status: AttemptRecord['status'];
  startedAt: string;
  endedAt: string | null;
  toolCalls: number | null;
  /** How the sandbox or worker ended (`exit 0`, `signal SIGKILL`, `timeout`…), when recorded. */
  exit: string | null;
  error: { code: string; message: string } | null;
  tarballSha256: string | null;
}

export interface AuditVerdict {
  /** The sealed task tarball (absent until the task is terminal and sealed). */
  tarball: { sha256: string; bytes: number; manifestSha256: string; signed: boolean; publicKeySha256: string | null; createdAt: string } | null;
  /** bg_result's verification of the committed answer (digests, attempt tarballs, signature). */
  verification: { ok: true } | { ok: false; code: string; message: string } | null;
  answerSha256: string | null;
  metadataSha256: string | null;
  engine: string | null;
  /** Candidate attempts accepted only after every tool call matched its replay, with their call counts. */
  replayedCalls: number;
}

export interface TaskDetail {
  task: TaskRow & { repoDir: string; resumeCount: number };
  attempts: AttemptRow[];
  /** The verified answer's text (untrusted: model output), null until completed or when unverifiable. */
  answer: string | null;
  citations: DeliveredCitations | null;
  audit: AuditVerdict;
}

export interface ResearchRow {
  id: string;
  workspaceId: string;
  status: string;
  query: string;
  sourceUrls: string[];
  limits: ResearchLimits;
  error: string | null;
  crawl: CrawlReport | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

export interface Overview {
  queued: number;
  running: number;
  sandboxBackend: string | null;
  tasksByState: Record<string, number>;
  /** Failed tasks among the most recent, counted by error code. */
  failuresByCode: Array<{ code: string; count: number; lastAt: string }>;
  maintenance: MaintenanceRunRecord[];
}

/** Whose data a request may read: everything, one uid's tasks, or one workspace's research runs. */
export type DashboardScope = { all: true } | { all: false; uid?: number; workspaceId?: string };

export interface DashboardData {
  tasks(scope: DashboardScope, state: TaskState | undefined, limit: number): Promise<TaskRow[]>;
  /** The task when the scope may see it; null otherwise (a foreign task reads as a missing one). */
  task(scope: DashboardScope, id: string): Promise<TaskDetail | null>;
  /** The sealed task tarball's bytes, under the same visibility rule. */
  tarball(scope: DashboardScope, id: string): Promise<Buffer | null>;
  researchRuns(scope: DashboardScope, limit: number): Promise<ResearchRow[]>;
  researchRun(scope: DashboardScope, id: string): Promise<{ run: ResearchRow; snapshots: ResearchSnapshotRecord[]; document: ResearchDocumentRecord | null } | null>;
  overview(scope: DashboardScope): Promise<Overview>;
}

export interface DashboardSources {
  tasks: TaskService;
  store: Store;
  resultChecks: ResultChecks;
  researchRuns: ResearchRunStore;
  keys: ApiKeyStore;
  queue: () => { queued: number; running: number };
  sandboxBackend: () => Promise<string | undefined>;
  maintenanceRuns: () => MaintenanceRunRecord[];
}

/** How many recent failed tasks the failure summary counts. */
const FAILURE_WINDOW = 200;

function taskRow(task: TaskRecord): TaskRow {
  return {
    id: task.id,
    workflow: task.workflow,
    state: task.state,
    createdAt: task.createdAt,
    updatedAt: task.updatedAt,
    callerUid: task.callerUid,
    objective: objectiveOf(task.canonicalInput),
    error: task.error === null ? null : { code: task.error.code, message: task.error.message },
  };
}

function parseDetail(text: string | null): Record<string, unknown> {
  if (text === null) return {};
  try {
    const parsed = JSON.parse(text) as unknown;
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function exitText(exit: unknown): string | null {
  if (typeof exit !== 'object' || exit === null) return null;
  const e = exit as { reason?: unknown; exitCode?: unknown; code?: unknown; signal?: unknown };
  const parts: string[] = [];
  if (typeof e.reason === 'string') parts.push(e.reason);
  const code = e.exitCode ?? e.code;
  if (typeof code === 'number') parts.push(`exit ${code}`);
  if (typeof e.signal === 'string') parts.push(`signal ${e.signal}`);
  return parts.length > 0 ? parts.join(', ') : null;
}

export function attemptRow(rec: AttemptRecord): AttemptRow {
  const detail = parseDetail(rec.detail);
  const err = detail.error as { code?: unknown; message?: unknown } | undefined;
  return {
    stage: rec.stage,
    attempt: rec.attempt,
    status: rec.status,
    startedAt: rec.startedAt,
    endedAt: rec.endedAt,
    toolCalls: typeof detail.toolCalls === 'number' ? detail.toolCalls : null,
    exit: exitText(detail.exit),
    error: err !== undefined && typeof err.code === 'string' ? { code: err.code, message: typeof err.message === 'string' ? err.message : '' } : null,
    tarballSha256: rec.tarballSha256,
  };
}

function researchRow(run: ResearchRunRecord): ResearchRow {
  return {
    id: run.id, workspaceId: run.workspaceId, status: run.status, query: run.query, sourceUrls: run.sourceUrls, limits: run.limits,
    error: run.error, crawl: run.crawlReport, createdAt: run.createdAt, startedAt: run.startedAt, finishedAt: run.finishedAt,
  };
}

function maySee(scope: DashboardScope, task: TaskRecord): boolean {
  return scope.all || (scope.uid !== undefined && task.callerUid === scope.uid);
}

export function createDashboardData(src: DashboardSources): DashboardData {
  const visibleTask = async (scope: DashboardScope, id: string): Promise<TaskRecord | null> => {
    const task = await src.tasks.find(id);
    return task !== null && maySee(scope, task) ? task : null;
  };
  const workspaces = async (scope: DashboardScope): Promise<string[]> => {
    if (!scope.all) return scope.workspaceId === undefined ? [] : [scope.workspaceId];
    return [...new Set((await src.keys.listKeys()).map((k) => k.workspaceId))];
  };
  const mayReadRun = (scope: DashboardScope, run: ResearchRunRecord): boolean => scope.all || (scope.workspaceId !== undefined && run.workspaceId === scope.workspaceId);

  return {
    async tasks(scope, state, limit) {
      if (!scope.all && scope.uid === undefined) return [];
      const rows = await src.tasks.list({ ...(state ? { state } : {}), ...(scope.all ? {} : { callerUid: scope.uid }), limit });
      return rows.map(taskRow);
    },

    async task(scope, id) {
      const task = await visibleTask(scope, id);
      if (task === null) return null;
      const attempts = (await src.store.listAttempts(id)).map(attemptRow);
      const stored = await src.store.getTaskTarball(id);
      const result = await src.store.getResult(id);
      let answer: string | null = null;
      let verification: AuditVerdict['verification'] = null;
      if (task.state === 'completed') {
        try {
          answer = (await src.tasks.readAnswer(task, src.resultChecks)).answer.toString('utf8');
          verification = { ok: true };
        } catch (err) {
          const fe = toFusionError(err);
          verification = { ok: false, code: fe.code, message: fe.message };
        }
      }
      const metadata = parseDetail(result?.metadata ?? null);
      const replayedCalls = attempts.filter((a) => a.stage.startsWith('candidate') && a.status === 'succeeded').reduce((n, a) => n + (a.toolCalls ?? 0), 0);
      return {
        task: { ...taskRow(task), repoDir: task.repoDir, resumeCount: task.resumeCount },
        attempts,
        answer,
        citations: (metadata.citations as DeliveredCitations | undefined) ?? null,
        audit: {
          tarball: stored === null ? null : {
            sha256: stored.sha256, bytes: stored.bytes, manifestSha256: stored.manifestSha256, signed: stored.signature !== null, publicKeySha256: stored.publicKeySha256, createdAt: stored.createdAt,
          },
          verification,
          answerSha256: result?.answerSha256 ?? null,
          metadataSha256: result?.metadataSha256 ?? null,
          engine: typeof metadata.engine === 'string' ? metadata.engine : null,
          replayedCalls,
        },
      };
    },

    async tarball(scope, id) {
      const task = await visibleTask(scope, id);
      if (task === null) return null;
      return (await src.store.getTaskTarball(id))?.data ?? null;
    },

    async researchRuns(scope, limit) {
      const runs: ResearchRunRecord[] = [];
      for (const ws of await workspaces(scope)) runs.push(...(await src.researchRuns.listRuns(ws, limit)));
      return runs.sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.id.localeCompare(a.id)).slice(0, limit).map(researchRow);
    },

    async researchRun(scope, id) {
      const run = await src.researchRuns.getRun(id);
      if (run === null || !mayReadRun(scope, run)) return null;
      return { run: researchRow(run), snapshots: await src.researchRuns.listSnapshots(id), document: await src.researchRuns.getDocument(id) };
    },

    async overview(scope) {
      const failures = new Map<string, { count: number; lastAt: string }>();
      const failed = scope.all || scope.uid !== undefined
        ? await src.tasks.list({ state: 'failed', ...(scope.all ? {} : { callerUid: scope.uid }), limit: FAILURE_WINDOW })
        : [];
      for (const t of failed) {
        const code = t.error?.code ?? 'unknown';
        const seen = failures.get(code);
        if (seen === undefined) failures.set(code, { count: 1, lastAt: t.updatedAt });
        else {
          seen.count += 1;
          if (t.updatedAt > seen.lastAt) seen.lastAt = t.updatedAt;
        }
      }
      // Daemon-wide facts (queue, backend, maintenance) are for root and the daemon's user only.
      const queue = scope.all ? src.queue() : { queued: 0, running: 0 };
      return {
        queued: queue.queued,
        running: queue.running,
        sandboxBackend: scope.all ? ((await src.sandboxBackend().catch(() => undefined)) ?? null) : null,
        tasksByState: scope.all ? await src.store.countTasksByState() : {},
        failuresByCode: [...failures].map(([code, v]) => ({ code, ...v })).sort((a, b) => b.count - a.count || a.code.localeCompare(b.code)),
        maintenance: scope.all ? src.maintenanceRuns() : [],
      };
    },
  };
}
