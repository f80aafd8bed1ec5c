/**
 * In-memory research run store (`--research-store memory`, docs/behaviour.md#g7): the process-local mode. Runs,
 * snapshots and documents are lost when the daemon stops (it says so at start-up). Same
 * compare-and-set semantics as the SQLite adapter; JavaScript's single thread makes each method
 * atomic because none awaits between its read and its write.
 */
import type { ResearchRunStatus } from '../contracts/research.js';
import { assertRunTransition, CANCELABLE } from '../contracts/research-run-state.js';
import type {
  NewResearchRun, ResearchDocumentRecord, ResearchRunRecord, ResearchRunStore, ResearchSnapshotRecord, RunCompletion,
} from './research-port.js';

const now = (): string => new Date().toISOString();
const copy = <T>(value: T): T => structuredClone(value);

export function createMemoryResearchStore(): ResearchRunStore {
  const runs = new Map<string, ResearchRunRecord>();
  const byKey = new Map<string, string>();
  const documents = new Map<string, ResearchDocumentRecord>();
  const snapshots = new Map<string, ResearchSnapshotRecord[]>();

  const move = (id: string, from: ResearchRunStatus, to: ResearchRunStatus): ResearchRunRecord | null => {
    assertRunTransition(from, to);
    const run = runs.get(id);
    if (run?.status !== from) return null;
    run.status = to;
    run.updatedAt = now();
    return run;
  };

  return {
    async createRun(input: NewResearchRun, claimAs?: string, failWith?: string) {
      const key = `${input.workspaceId}\0${input.idempotencyKey}`;
      const existing = byKey.get(key);
      if (existing !== undefined) return { run: copy(runs.get(existing)!), created: false };
      const at = now();
      const run: ResearchRunRecord = {
        ...copy(input), status: 'queued', error: null, resultDocumentId: null, cancelRequestedAt: null, userAgent: null,
        crawlReport: null, startedAt: null, finishedAt: null, claims: 0, createdAt: at, updatedAt: at,
      };
      runs.set(run.id, run);
      byKey.set(key, run.id);
      if (claimAs !== undefined) {
        assertRunTransition('queued', 'running');
        Object.assign(run, { status: 'running', userAgent: claimAs, startedAt: at, claims: 1 });
        if (failWith !== undefined) {
          assertRunTransition('running', 'failed');
          Object.assign(run, { status: 'failed', error: failWith, finishedAt: at });
        }
      }
      return { run: copy(run), created: true };
    },
    async getRun(id) {
      const run = runs.get(id);
      return run === undefined ? null : copy(run);
    },
    async claimRun(id, userAgent, reclaim) {
      const run = runs.get(id);
      if (run === undefined || run.cancelRequestedAt !== null) return null;
      if (!(run.status === 'queued' || (reclaim && run.status === 'running'))) return null;
      const moved = move(id, run.status, 'running')!;
      moved.userAgent = userAgent;
      moved.startedAt ??= moved.updatedAt;
      moved.claims += 1;
      return copy(moved);
    },
    async completeRun(id, completion: RunCompletion) {
      const run = move(id, 'running', 'succeeded');
      if (run === null) return null;
      const at = run.updatedAt;
      documents.set(id, { ...copy(completion.document), createdAt: at });
      snapshots.set(id, copy(completion.snapshots));
      run.resultDocumentId = completion.document.id;
      run.crawlReport = copy(completion.crawlReport);
      run.finishedAt = at;
      return copy(run);
    },
    async failRun(id, from, error, crawlReport) {
      const run = move(id, from, 'failed');
      if (run === null) return null;
      run.error = error;
      if (crawlReport !== undefined) run.crawlReport = copy(crawlReport);
      run.finishedAt = run.updatedAt;
      return copy(run);
    },
    async cancelRun(id) {
      const run = runs.get(id);
      if (run === undefined) return null;
      if (!CANCELABLE.includes(run.status)) return { run: copy(run), changed: false };
      const moved = move(id, run.status, 'canceled')!;
      moved.cancelRequestedAt = moved.updatedAt;
      moved.finishedAt = moved.updatedAt;
      return { run: copy(moved), changed: true };
    },
    async failUnfinished(error) {
      const ids: string[] = [];
      for (const run of runs.values()) {
        if (run.status !== 'queued' && run.status !== 'running') continue;
        move(run.id, run.status, 'failed');
        run.error = error;
        run.finishedAt = run.updatedAt;
        ids.push(run.id);
      }
      return ids;
    },
    async listUnfinished() {
      return [...runs.values()].filter((r) => r.status === 'queued' || r.status === 'running').map((r) => ({ id: r.id, status: r.status as 'queued' | 'running' }));
    },
    async listRuns(workspaceId, limit, after) {
      const newestFirst = (a: ResearchRunRecord, b: ResearchRunRecord): number => (a.createdAt === b.createdAt ? (a.id < b.id ? 1 : a.id > b.id ? -1 : 0) : a.createdAt < b.createdAt ? 1 : -1);
      const later = (r: ResearchRunRecord): boolean => after === undefined || r.createdAt < after.createdAt || (r.createdAt === after.createdAt && r.id < after.id);
      return [...runs.values()].filter((r) => r.workspaceId === workspaceId && later(r)).sort(newestFirst).slice(0, limit).map(copy);
    },
    async getDocument(runId) {
      const d = documents.get(runId);
      return d === undefined ? null : copy(d);
    },
    async listSnapshots(runId) {
      return copy(snapshots.get(runId) ?? []);
    },
    async close() {
      runs.clear();
      byKey.clear();
      documents.clear();
      snapshots.clear();
    },
  };
}
