/**
 * The research stores: runs (with their snapshots and document) and API keys. Two ports because
 * they live apart in `--research-store memory` mode: runs may be in memory, keys are always in
 * the SQLite file the `fusion keys` commands write.
 *
 * Every status change is a compare-and-set on the run's status in one transaction, so a cancel
 * racing a completion ends in exactly one terminal state, and a run is claimed by one executor.
 */
import type { ResearchLimits } from '../contracts/research-limits.js';
import type { ApiKeyKind, ResearchRunStatus, ResearchSnapshotView } from '../contracts/research.js';
import type { CrawlSkip as CrawlSkipNote, RobotsNote as CrawlRobotsNote } from '../contracts/research.js';

export interface ResearchRunRecord {
  id: string;
  workspaceId: string;
  idempotencyKey: string;
  payloadSha256: string;
  query: string;
  sourceUrls: string[];
  limits: ResearchLimits;
  status: ResearchRunStatus;
  error: string | null;
  resultDocumentId: string | null;
  cancelRequestedAt: string | null;
  userAgent: string | null;
  crawlReport: CrawlReport | null;
  startedAt: string | null;
  finishedAt: string | null;
  /** How many times an executor claimed the run (more than 1 after a retried queue job). */
  claims: number;
  createdAt: string;
  updatedAt: string;
}

export interface NewResearchRun {
  id: string;
  workspaceId: string;
  idempotencyKey: string;
  payloadSha256: string;
  query: string;
  sourceUrls: string[];
  limits: ResearchLimits;
}

/** The stored snapshot is the API's snapshot view, field for field. */
export type ResearchSnapshotRecord = ResearchSnapshotView;

export interface ResearchDocumentRecord {
  id: string;
  runId: string;
  workspaceId: string;
  name: string;
  mimeType: string;
  tags: string[];
  sourceUri: string;
  indexingStatus: string;
  status: string;
  enabled: boolean;
  content: string;
  createdAt: string;
}

export interface RunCompletion {
  snapshots: ResearchSnapshotRecord[];
  document: Omit<ResearchDocumentRecord, 'createdAt'>;
  crawlReport: CrawlReport;
}

/** What a finished crawl noted beside its snapshots. */
export interface CrawlReport {
  robots: CrawlRobotsNote[];
  skipped: CrawlSkipNote[];
  /** Skips beyond the listed ones (the crawler bounds its list). */
  skippedOmitted?: number;
  /** The limit that stopped the crawl before its queue was empty, if one did. */
  stoppedBy?: string;
}

export interface ResearchRunStore {
  /**
   * Inserts the run in `queued`, or returns the run already holding (workspace, idempotency key):
   * `created` is true for exactly one caller per key, however many race. With `claimAs` (a
   * User-Agent) the new run is also claimed, queued → running, in the same transaction: direct
   * dispatch executes it in the create request, so this saves one durable commit on that path.
   * With `failWith` as well, the claimed run also fails with that message (running → failed,
   * `finishedAt` set) in the same insert: a run whose execution could only fail before doing
   * anything is recorded as that execution would have left it, in one durable commit.
   */
  createRun(run: NewResearchRun, claimAs?: string, failWith?: string): Promise<{ run: ResearchRunRecord; created: boolean }>;
  getRun(id: string): Promise<ResearchRunRecord | null>;
  /**
   * queued → running when no cancel was requested; with `reclaim`, also running → running (a
   * retried queue job whose first executor died). Records the User-Agent. Null when not claimable.
   */
  claimRun(id: string, userAgent: string, reclaim: boolean): Promise<ResearchRunRecord | null>;
  /** running → succeeded with the snapshots and the document, in one transaction; null if no longer running. */
  completeRun(id: string, completion: RunCompletion): Promise<ResearchRunRecord | null>;
  /** `from` → failed with the message; null if the run was not in `from`. */
  failRun(id: string, from: 'queued' | 'running', error: string, crawlReport?: RunCompletion['crawlReport']): Promise<ResearchRunRecord | null>;
  /** queued|running → canceled (recording when); any other run is returned unchanged. Null if absent. */
  cancelRun(id: string): Promise<{ run: ResearchRunRecord; changed: boolean } | null>;
  /** queued|running → failed with `error`, for every such run (start-up recovery); returns their ids. */
  failUnfinished(error: string): Promise<string[]>;
  /** Every queued or running run, oldest first (the research queue's reconciler compares them with the queue). */
  listUnfinished(): Promise<Array<{ id: string; status: 'queued' | 'running' }>>;
  /**
   * A workspace's runs, newest first (created_at, then id, descending), at most `limit`; with
   * `after`, only those that come after that run in this order (the keyset of a page).
   */
  listRuns(workspaceId: string, limit: number, after?: { createdAt: string; id: string }): Promise<ResearchRunRecord[]>;
  getDocument(runId: string): Promise<ResearchDocumentRecord | null>;
  listSnapshots(runId: string): Promise<ResearchSnapshotRecord[]>;
  close(): Promise<void>;
}

export interface ApiKeyRecord {
  id: string;
  workspaceId: string;
  kind: ApiKeyKind;
  /** Hex sha256 of the whole key; the key itself is never stored. */
  keySha256: string;
  createdAt: string;
  revokedAt: string | null;
}

export interface ApiKeyStore {
  insertKey(key: Omit<ApiKeyRecord, 'createdAt' | 'revokedAt'>): Promise<ApiKeyRecord>;
  getKey(id: string): Promise<ApiKeyRecord | null>;
  listKeys(): Promise<ApiKeyRecord[]>;
  /** Sets revoked_at once; returns the key (null if absent). */
  revokeKey(id: string): Promise<ApiKeyRecord | null>;
}
