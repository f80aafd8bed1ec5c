/**
 * The research-run service behind /api/v1/research: create with idempotency, read back, cancel.
 * Callers are already authenticated; every read checks that the run belongs to the caller's
 * workspace and answers not_found otherwise (a foreign run is indistinguishable from none).
 */
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import { canonicalJson, sha256Hex } from '../contracts/canonical.js';
import type { ResearchDispatch, ResearchPayload } from '../contracts/research.js';
import type { ResearchDocumentRecord, ResearchRunRecord, ResearchRunStore, ResearchSnapshotRecord } from '../store/research-port.js';
import type { Principal } from './api-keys.js';
import type { ResearchDispatcher } from './dispatch.js';
import { researchRunId } from './run-id.js';
import { asStorageFull } from '../store/storage-full.js';

export interface CreateOutcome {
  run: ResearchRunRecord;
  deduplicated: boolean;
  dispatch: ResearchDispatch;
}

export function payloadSha256(payload: ResearchPayload): string {
  return sha256Hex(canonicalJson(payload));
}

export class ResearchService {
  private readonly log: Logger;

  constructor(
    readonly store: ResearchRunStore,
    readonly dispatcher: ResearchDispatcher,
    log: Logger,
  ) {
    this.log = log.child({ component: 'research' });
  }

  async create(principal: Principal, idempotencyKey: string, payload: ResearchPayload): Promise<CreateOutcome> {
    const id = researchRunId(principal.workspaceId, idempotencyKey);
    const digest = payloadSha256(payload);
    let inserted: Awaited<ReturnType<ResearchRunStore['createRun']>>;
    try {
      inserted = await this.dispatcher.create(
        principal.workspaceId,
        (claimAs, failWith) =>
          this.store.createRun({ id, workspaceId: principal.workspaceId, idempotencyKey, payloadSha256: digest, ...payload }, claimAs, failWith),
        { id, sourceUrls: payload.sourceUrls },
      );
    } catch (err) {
      // A full disk is the same state here as for a task submit: 507 storage_full, retryable.
      throw asStorageFull(err, 'research run');
    }
    const { run, created } = inserted;
    if (!created) {
      if (run.payloadSha256 !== digest) {
        throw new FusionError('conflict', `Idempotency-Key was already used for research run ${run.id} with a different query, sourceUrls or limits`, {
          details: { runId: run.id, field: 'Idempotency-Key' },
        });
      }
      return { run, deduplicated: true, dispatch: { dispatched: false } };
    }
    this.log.info({ runId: id, workspaceId: principal.workspaceId, mode: this.dispatcher.mode }, 'research run created');
    const dispatched = await this.dispatcher.dispatch(run);
    return { run: dispatched.run ?? (await this.store.getRun(id)) ?? run, deduplicated: false, dispatch: dispatched.dispatch };
  }

  /**
   * The caller's workspace's runs, newest first, `limit` at a time. `cursor` is the id of the
   * last run of the previous page (its `nextCursor`); a cursor that names no run of this
   * workspace is invalid input, never another workspace's position.
   */
  async list(principal: Principal, limit: number, cursor?: string): Promise<{ runs: ResearchRunRecord[]; nextCursor: string | null }> {
    let after: { createdAt: string; id: string } | undefined;
    if (cursor !== undefined) {
      const at = await this.store.getRun(cursor);
      if (at === null || at.workspaceId !== principal.workspaceId) {
        throw new FusionError('invalid_input', `cursor ${cursor.slice(0, 100)} names no research run of this workspace: pass the nextCursor of the previous page, or no cursor for the first page`, { details: { field: 'cursor' } });
      }
      after = { createdAt: at.createdAt, id: at.id };
    }
    // One more than asked tells whether another page follows.
    const runs = await this.store.listRuns(principal.workspaceId, limit + 1, after);
    const page = runs.slice(0, limit);
    return { runs: page, nextCursor: runs.length > limit ? page[page.length - 1]!.id : null };
  }

  async get(principal: Principal, id: string): Promise<ResearchRunRecord> {
    const run = await this.store.getRun(id);
    if (run === null || run.workspaceId !== principal.workspaceId) throw new FusionError('not_found', `no research run ${id}`, { details: { runId: id } });
    return run;
  }

  /** queued/running → canceled (and stop it); a terminal run is returned as it is. */
  async cancel(principal: Principal, id: string): Promise<ResearchRunRecord> {
    await this.get(principal, id);
    const outcome = await this.store.cancelRun(id);
    if (outcome === null) throw new FusionError('not_found', `no research run ${id}`, { details: { runId: id } });
    if (outcome.changed) {
      this.log.info({ runId: id }, 'research run canceled');
      await this.dispatcher.cancel(id);
    }
    return outcome.run;
  }

  async document(principal: Principal, id: string): Promise<ResearchDocumentRecord> {
    const run = await this.get(principal, id);
    const doc = run.status === 'succeeded' ? await this.store.getDocument(id) : null;
    if (doc === null) throw new FusionError('not_found', `research run ${id} has no document (status ${run.status}); it exists once the run succeeded`, { details: { runId: id, status: run.status } });
    return doc;
  }

  async snapshots(principal: Principal, id: string): Promise<ResearchSnapshotRecord[]> {
    await this.get(principal, id);
    return this.store.listSnapshots(id);
  }

  activeRuns(): number {
    return this.dispatcher.activeRuns();
  }

  close(): Promise<void> {
    return this.dispatcher.close();
  }
}
