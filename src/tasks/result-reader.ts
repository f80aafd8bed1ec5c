/**
 * bg_result (docs/behaviour.md#f3): never blocks, verifies before delivering, never truncates.
 *
 * A committed result is delivered only after the answer file and the metadata recompute to the
 * digests stored at commit, and every attempt named in the metadata is in the sealed task
 * tarball with its recorded digest (before sealing: its attempt .tar on disk has it). Usage is attached on the first successful retrieval only.
 */
import { existsSync, readFileSync, lstatSync } from 'node:fs';
import { FusionError } from '../errors.js';
import { INLINE_LIMIT_BYTES } from '../contracts/constants.js';
import type { DeliveryMode } from '../contracts/api.js';
import type { ResultRecord, Store, TaskRecord } from '../store/port.js';
import { isTerminal, statusOf } from '../contracts/task-state.js';
import { sha256Hex } from '../contracts/sha256.js';
import { nothingReadOf, nothingReadSentence, type NothingRead, type NothingReadMetadata } from './nothing-read.js';

export interface BgResult {
  taskId: string;
  workflow: string;
  state: string;
  /** The workflow state while running (`state` is then 'running', docs/behaviour.md#f3). */
  stage?: string;
  status: 'running' | 'completed' | 'failed' | 'cancelled';
  delivery: 'none' | 'inline' | 'artifact';
  answer:
    | { present: false; reason: 'run_did_not_commit' | 'still_running' }
    | { present: true; bytes: number; sha256: string; verified: true; header: string; text?: string; path?: string };
  error?: { code: string; message: string; state: string } | null;
  engine?: string;
  /** The supervisor's check of every citation in the delivered answer. */
  citations?: unknown;
  /** The repository snapshot the task ran over: its digest, and what was left out and why (docs/behaviour.md#what-the-task-could-read). */
  repository?: unknown;
  /** A research task's declared sources no candidate fetched, each with the last failure (docs/behaviour.md#what-the-task-could-read). */
  sourcesNotRead?: unknown;
  /**
   * Completed: true when the task read none of its declared sources (research) or none of its
   * repository's files, so the verified answer is written from nothing (docs/behaviour.md#nothing-read).
   */
  nothingRead?: boolean;
  /**
   * With a signing key: true when the answer was checked against the signed task tarball; false
   * for a task sealed unsigned before the key was created (then `sealedBeforeKey` says when).
   */
  signed?: boolean;
  /** When the signing key was created, for a task sealed unsigned before it (docs/security.md#signing-later). */
  sealedBeforeKey?: string;
  usage?: unknown;
}

/** How the task tarball vouches for a result: signed, or sealed unsigned before the key existed. */
export type SealStanding = { signed: true } | { signed: false; sealedBeforeKey: string };

/** Extra check of a completed result before delivery (the signed task tarball); throws artifact_error. */
export type ResultSealCheck = (task: TaskRecord, answerSha256: string, metadata: string) => Promise<SealStanding>;

/**
 * Checks the attempts a result names against the sealed task tarball (throws artifact_error);
 * false when the task has no sealed tarball, so the attempt .tar files on disk are checked.
 */
export type AttemptRecordCheck = (task: TaskRecord, attempts: readonly AttemptDigest[]) => Promise<boolean>;

/** Usage is attached to the first retrieval of a terminal task, whatever its end: every call was paid for. */
async function firstUsage(store: Store, task: TaskRecord): Promise<unknown> {
  if (task.usage === null) return undefined;
  // Bookkeeping only: reading a result never needs a write to succeed (a full disk keeps
  // results readable); when the flag cannot be written, the usage is returned again later.
  const first = await store.claimUsageDelivery(task.id).catch(() => true);
  return first ? task.usage : undefined;
}

function invalid(reason: string, details: Record<string, unknown> = {}): FusionError {
  return new FusionError('artifact_error', `fusion committed result invalid: ${reason}`, { details });
}

function readRegular(path: string, what: string): Buffer {
  let st;
  try {
    st = lstatSync(path);
  } catch {
    throw invalid(`${what} is missing`);
  }
  if (!st.isFile()) throw invalid(`${what} is not a regular file`);
  return readFileSync(path);
}

export interface AttemptDigest {
  stage: string;
  attempt: number;
  tarballPath: string;
  tarballSha256: string;
}

/**
 * Where an answer kept in the database (cluster mode) is written on this host for artifact
 * delivery, when the writer's file is not here; returns the local path.
 */
export type AnswerMaterialiser = (taskId: string, answer: Buffer) => string;

/** The writer's file when it is here and holds exactly the committed bytes. */
function sameFileHere(path: string, answer: Buffer): boolean {
  try {
    return lstatSync(path).isFile() && readFileSync(path).equals(answer);
  } catch {
    return false;
  }
}

/** What the daemon adds to a result read: its checks, and where this host keeps a task's files. */
export interface ResultReadOptions {
  /** With a signing key: the signed task tarball check. */
  sealCheck?: ResultSealCheck;
  /** The check of a result's attempts against the sealed task tarball. */
  attemptCheck?: AttemptRecordCheck;
  /** Writes a local copy of an answer kept in the database (cluster mode, another host's file). */
  materialise?: AnswerMaterialiser;
  /**
   * This daemon's answer file of a task, read in preference to the path the row recorded at
   * commit (they are the same unless the data directory was restored under another path,
   * docs/operations.md#restore). Either copy must recompute to the committed digest.
   */
  answerFileHere?: (taskId: string) => string;
}

export async function readBgResult(store: Store, task: TaskRecord, delivery: DeliveryMode = 'auto', options: ResultReadOptions = {}): Promise<BgResult> {
  const { materialise } = options;
  const base = { taskId: task.id, workflow: task.workflow, state: task.state, status: statusOf(task.state) };
  if (!isTerminal(task.state)) {
    return { ...base, state: 'running', stage: task.state, delivery: 'none', answer: { present: false, reason: 'still_running' } };
  }
  if (task.state !== 'completed') {
    const usage = await firstUsage(store, task);
    return { ...base, delivery: 'none', answer: { present: false, reason: 'run_did_not_commit' }, error: task.error, ...(usage === undefined ? {} : { usage }) };
  }
  const { result, answer, answerSha, metadata, answerPath, seal } = await verifiedAnswer(store, task, options);

  const nothing = nothingReadOf(task.workflow, task.canonicalInput, metadata);
  const header = `Answer: ${answer.length} bytes, sha256:${answerSha} (verified).${nothing === null ? '' : ` ${nothingReadSentence(nothing)}`}`;
  const fits = answer.length <= INLINE_LIMIT_BYTES;
  if (delivery === 'inline' && !fits) {
    throw new FusionError(
      'inline_limit_exceeded',
      `fusion answer is ${answer.length} bytes, above the ${INLINE_LIMIT_BYTES}-byte inline limit. Use delivery:"artifact"; nothing was truncated.`,
      { details: { bytes: answer.length, limit: INLINE_LIMIT_BYTES } },
    );
  }
  const inline = delivery === 'inline' || (delivery === 'auto' && fits);
  const usage = await firstUsage(store, task);
  return {
    ...base,
    delivery: inline ? 'inline' : 'artifact',
    answer: inline
      ? { present: true, bytes: answer.length, sha256: answerSha, verified: true, header, text: answer.toString('utf8') }
      : { present: true, bytes: answer.length, sha256: answerSha, verified: true, header, path: artifactPath(answerPath, task.id, answer, result.answerData !== undefined, materialise) },
    ...(metadata.engine === undefined ? {} : { engine: metadata.engine }),
    ...(metadata.citations === undefined ? {} : { citations: metadata.citations }),
    ...(metadata.repository === undefined ? {} : { repository: metadata.repository }),
    ...(metadata.sources_not_read === undefined ? {} : { sourcesNotRead: metadata.sources_not_read }),
    nothingRead: nothing !== null,
    ...(seal === undefined ? {} : seal),
    ...(usage === undefined ? {} : { usage }),
  };
}

interface VerifiedAnswer {
  result: ResultRecord;
  answer: Buffer;
  answerSha: string;
  metadata: { engine?: string; attempts?: AttemptDigest[]; answer_sha256?: string; citations?: unknown } & NothingReadMetadata;
  /** The answer file read: the committed path, or this daemon's copy after a restore elsewhere. */
  answerPath: string;
  /** With a signing key: how the task tarball vouches for the answer. */
  seal?: SealStanding;
}

/** A completed task's answer bytes, after every check bg_result makes (throws artifact_error). */
async function verifiedAnswer(store: Store, task: TaskRecord, options: ResultReadOptions): Promise<VerifiedAnswer> {
  const { sealCheck, attemptCheck } = options;
  const result = await store.getResult(task.id);
  if (!result) throw invalid('the task is completed but no result row exists');

  // Verify before anyone reads a byte of it.
  if (sha256Hex(result.metadata) !== result.metadataSha256) throw invalid('metadata digest mismatch');
  // Cluster mode keeps the bytes in the row (any daemon serves them); otherwise the file is the copy.
  // This daemon's own copy first: its data directory is its own (0700), while a recorded path
  // from before a restore elsewhere may now be anyone's to write.
  const here = options.answerFileHere?.(task.id);
  const answerPath = here !== undefined && existsSync(here) ? here : result.answerPath;
  const answer = result.answerData ?? readRegular(answerPath, 'answer file');
  const answerSha = sha256Hex(answer);
  if (answer.length !== result.answerBytes || answerSha !== result.answerSha256) {
    throw invalid('answer digest mismatch', { expected: result.answerSha256, observed: answerSha });
  }
  const metadata = JSON.parse(result.metadata) as VerifiedAnswer['metadata'];
  if (metadata.answer_sha256 !== undefined && metadata.answer_sha256 !== answerSha) throw invalid('metadata names a different answer digest');
  // Once sealed, the task tarball is the one copy of the attempts (their files are pruned).
  const checkedSealed = attemptCheck !== undefined && (await attemptCheck(task, metadata.attempts ?? []));
  for (const a of checkedSealed ? [] : (metadata.attempts ?? [])) {
    const tar = readRegular(a.tarballPath, `audit tarball of ${a.stage} attempt ${a.attempt}`);
    if (sha256Hex(tar) !== a.tarballSha256) throw invalid(`audit tarball digest mismatch for ${a.stage} attempt ${a.attempt}`);
  }
  const seal = sealCheck === undefined ? undefined : await sealCheck(task, answerSha, result.metadata);

  return { result, answer, answerSha, metadata, answerPath, ...(seal === undefined ? {} : { seal }) };
}

/**
 * For `/wait`: whether a completed task read nothing (docs/behaviour.md#nothing-read), from its
 * committed metadata once that recomputes to its digest; null for a task not completed or a
 * result that does not check (bg_result then says why). No usage is claimed: this is not a retrieval.
 */
export async function completedNothingRead(store: Store, task: TaskRecord): Promise<NothingRead | null> {
  if (task.state !== 'completed') return null;
  const result = await store.getResult(task.id);
  if (result === null || sha256Hex(result.metadata) !== result.metadataSha256) return null;
  try {
    return nothingReadOf(task.workflow, task.canonicalInput, JSON.parse(result.metadata) as NothingReadMetadata);
  } catch {
    return null;
  }
}

/**
 * `GET /v1/tasks/:id/answer`: the verified answer's bytes, whatever their size. For callers who
 * cannot open an artifact's path (a socket-group member: the file is in the daemon's 0700 data
 * directory; another host's copy in cluster mode), docs/behaviour.md#f3.
 */
export async function readAnswerBytes(store: Store, task: TaskRecord, options: ResultReadOptions = {}): Promise<{ answer: Buffer; sha256: string }> {
  if (!isTerminal(task.state)) {
    throw new FusionError('task_not_terminal', `task ${task.id} is still running (${task.state}); wait for it first`, { details: { taskId: task.id, state: task.state } });
  }
  if (task.state !== 'completed') {
    throw new FusionError('not_found', `task ${task.id} ended ${task.state} and committed no answer`, { details: { taskId: task.id, state: task.state } });
  }
  const { answer, answerSha } = await verifiedAnswer(store, task, options);
  return { answer, sha256: answerSha };
}

/** The path an artifact delivery names: the committed file, or (cluster mode, another host's file) a local copy. */
function artifactPath(committed: string, taskId: string, answer: Buffer, fromDatabase: boolean, materialise?: AnswerMaterialiser): string {
  if (!fromDatabase || sameFileHere(committed, answer)) return committed;
  if (materialise === undefined) throw invalid('the answer file is on another host and this daemon cannot write a local copy');
  return materialise(taskId, answer);
}
