/**
 * Attempts kept in the shared database (cluster mode, docs/operations.md#cluster-mode): a daemon
 * may die after some attempts of a task committed, and another daemon, on another host, then
 * resumes the task and seals its tarball. It cannot read the dead daemon's disk, so every
 * attempt's evidence (its attempt tarball, and the replay record of a candidate) is stored in
 * the database before the attempt's row records its tarball digest; the sealer reads from there
 * whatever attempt is not on its own disk.
 *
 * Stored as a checkpoint of the task (`attempt-archive:<stage>.attempt-<n>`): like the stage
 * checkpoints, it is what resuming elsewhere needs, it goes with the task (ON DELETE CASCADE),
 * and it is dropped once the sealed task tarball holds the attempt (dropSealedCheckpoints). The
 * tar is gzip-compressed and base64-encoded (a checkpoint is text, on both engines).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { z } from 'zod';
import { sha256Hex } from '../contracts/canonical.js';
import { FusionError } from '../errors.js';
import type { Store } from '../store/port.js';
import { attemptDirName, taskPaths } from '../tasks/paths.js';
import { REPLAY_DIR, REPLAY_RECORD_SUFFIX } from './replay.js';
import { readMembers, type TarMember } from './tar-members.js';

export const ATTEMPT_ARCHIVE_SCHEMA = 'fusion.attempt-archive.v1';

const ArchiveSchema = z.object({
  schema_version: z.literal(ATTEMPT_ARCHIVE_SCHEMA),
  tar_sha256: z.string(),
  /** The attempt tarball, gzip then base64. */
  tar_gzip_base64: z.string(),
  /** The candidate's replay record (JSON text as written), null when none was written. */
  replay: z.string().nullable(),
}).strict();

/**
 * The most an archived attempt tarball may inflate to (a child's stdout and stderr are capped
 * at 48 MiB together, its answer and /out far below this).
 */
export const MAX_ATTEMPT_ARCHIVE_BYTES = 1024 * 1024 * 1024;

/** The checkpoint key of one attempt's archive. */
export function attemptArchiveKey(stage: string, attempt: number): string {
  return `attempt-archive:${attemptDirName(stage, attempt)}`;
}

/** The replay record file of an attempt (written beside attempts/, see replay-attempt.ts). */
function replayFile(tasksDir: string, taskId: string, name: string): string {
  return join(taskPaths(tasksDir, taskId).dir, REPLAY_DIR, `${name}.json`);
}

/**
 * Stores an attempt's tarball (read back from `tarballPath`) and its replay record, if one was
 * written, in the database. Called before the attempt's row records the tarball digest, so an
 * attempt whose row names a tarball always has its archive.
 */
export async function archiveAttempt(
  store: Store, tasksDir: string, taskId: string, stage: string, attempt: number, tarballPath: string,
): Promise<void> {
  const tar = readFileSync(tarballPath);
  const replayPath = replayFile(tasksDir, taskId, attemptDirName(stage, attempt));
  const archive: z.infer<typeof ArchiveSchema> = {
    schema_version: ATTEMPT_ARCHIVE_SCHEMA,
    tar_sha256: sha256Hex(tar),
    tar_gzip_base64: gzipSync(tar, { level: 9 }).toString('base64'),
    replay: existsSync(replayPath) ? readFileSync(replayPath, 'utf8') : null,
  };
  await store.saveCheckpoint(taskId, attemptArchiveKey(stage, attempt), JSON.stringify(archive));
}

/**
 * The task-tarball members of an archived attempt, as the sealer would read them from the
 * attempt's directory (`attempts/<name>/<file>`) and replay record
 * (`attempts/<name>.replay.json`); null when the database holds no archive of it. The members
 * are whatever was archived: `fusion audit verify` re-packs them against the recorded digest.
 */
export async function archivedAttemptMembers(
  store: Store, taskId: string, stage: string, attempt: number, limits: { maxBytes: number } = { maxBytes: MAX_ATTEMPT_ARCHIVE_BYTES },
): Promise<TarMember[] | null> {
  const text = await store.getCheckpoint(taskId, attemptArchiveKey(stage, attempt));
  if (text === null) return null;
  const archive = ArchiveSchema.parse(JSON.parse(text));
  const name = attemptDirName(stage, attempt);
  // Whoever can write the database writes these bytes: inflating is bounded (a gzip bomb stops
  // at the bound), and the tar must be the one whose digest the archive records.
  let tar: Buffer;
  try {
    tar = gunzipSync(Buffer.from(archive.tar_gzip_base64, 'base64'), { maxOutputLength: limits.maxBytes });
  } catch (err) {
    throw new FusionError('store_error', `the stored archive of ${name} of task ${taskId} is unreadable or inflates to more than ${limits.maxBytes} bytes; not sealed`, { retryable: false, cause: err });
  }
  if (sha256Hex(tar) !== archive.tar_sha256) {
    throw new FusionError('store_error', `the stored archive of ${name} of task ${taskId} does not match its recorded sha256; not sealed`, { retryable: false });
  }
  const members: TarMember[] = readMembers(tar).map((m) => ({ name: `attempts/${name}/${m.name}`, data: m.data }));
  if (archive.replay !== null) members.push({ name: `attempts/${name}${REPLAY_RECORD_SUFFIX}`, data: Buffer.from(archive.replay, 'utf8') });
  return members;
}
