/**
 * One sealed tarball per task, written when the task reaches a terminal state and stored in the
 * database (so the record survives without the task directory, and any daemon reading the
 * database can serve it).
 *
 * Members (all that exist for the task):
 *   task.json, task-options.json, canonical-input.json, source-policy.json, budget-plan.json,
 *   attempts.json (every attempt row), attempts/<stage>.attempt-<n>/<file> (log, seal, broker
 *   record, answer, request… of each attempt), attempts/<stage>.attempt-<n>.replay.json,
 *   anonymization.json, blind-candidates.json, evaluation.json, result/answer.md,
 *   result/metadata.json, result/result-record.json, error.json, prompts.json, roster.json,
 *   events.json, manifest.json (sha256 and size of every other member) and, with a signing key,
 *   signature.json (Ed25519 over the manifest digest).
 * The bytes are deterministic for the same content (tar-members.ts).
 */
import { lstatSync, readFileSync, readdirSync, type Dirent } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { canonicalJson, sha256Hex, sourcePolicy, type CanonicalInput } from '../contracts/canonical.js';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Store, TaskRecord, TaskTarballRecord } from '../store/port.js';
import { attemptDirName, taskPaths } from '../tasks/paths.js';
import { PROMPTS_VERSION, promptsSha256 } from '../contracts/prompts.js';
import { packMembers, type TarMember } from './tar-members.js';
import { signManifestDigest, type SigningKey } from './signing.js';
import { REPLAY_DIR, REPLAY_RECORD_SUFFIX } from './replay.js';
import { archivedAttemptMembers } from './attempt-archive.js';

export const MANIFEST_SCHEMA = 'fusion.task-manifest.v1';
export const SIGNATURE_SCHEMA = 'fusion.task-signature.v1';
export const MANIFEST_MEMBER = 'manifest.json';
export const SIGNATURE_MEMBER = 'signature.json';

export interface ManifestEntry {
  name: string;
  bytes: number;
  sha256: string;
}

export interface TaskManifest {
  schema_version: typeof MANIFEST_SCHEMA;
  task_id: string;
  state: string;
  members: ManifestEntry[];
}

export interface TaskSignature {
  schema_version: typeof SIGNATURE_SCHEMA;
  algorithm: 'ed25519';
  manifest_sha256: string;
  public_key_sha256: string;
  /** PEM (SPKI); lets anyone check integrity, while `--pubkey` pins whose key it must be. */
  public_key: string;
  signature: string;
}

export interface SealDeps {
  store: Store;
  tasksDir: string;
  /** Null: tarballs are sealed without a signature. */
  signingKey: SigningKey | null;
  /** The engine and model roster of a task (from its stored options). */
  describeModels(task: TaskRecord): unknown;
  log: Logger;
  /** Told of each tarball sealed (the daemon's metrics, src/instrument.ts); absent offline. */
  onSealed?: (sealed: { bytes: number; signed: boolean }) => void;
}

const LETTERS = ['A', 'B', 'C'] as const;

const json = (value: unknown): Buffer => Buffer.from(`${canonicalJson(value)}\n`, 'utf8');

function regularFile(path: string): Buffer | null {
  try {
    if (!lstatSync(path).isFile()) return null;
    return readFileSync(path);
  } catch {
    return null;
  }
}

/** Every file an attempt left: its directory's regular files, and the attempts' replay records. */
function attemptMembers(attemptsDir: string, replayDir: string): TarMember[] {
  const members: TarMember[] = [];
  const list = (dir: string): Dirent[] => {
    try {
      return readdirSync(dir, { withFileTypes: true });
    } catch {
      return [];
    }
  };
  for (const entry of list(attemptsDir)) {
    // `<attempt>.tar` is left out: its digest is re-derived from the attempt's files on verify.
    if (!entry.isDirectory()) continue;
    for (const file of list(join(attemptsDir, entry.name))) {
      if (!file.isFile()) continue;
      const data = regularFile(join(attemptsDir, entry.name, file.name));
      if (data !== null) members.push({ name: `attempts/${entry.name}/${file.name}`, data });
    }
  }
  for (const entry of list(replayDir)) {
    if (!entry.isFile() || !entry.name.endsWith('.json')) continue;
    const data = regularFile(join(replayDir, entry.name));
    if (data !== null) members.push({ name: `attempts/${entry.name.slice(0, -'.json'.length)}${REPLAY_RECORD_SUFFIX}`, data });
  }
  return members;
}

/**
 * Builds the members of a terminal task's tarball from the database and its directory (and, for
 * attempts not on this host's disk, their archives in the database).
 */
export async function collectTaskMembers(deps: SealDeps, task: TaskRecord): Promise<TarMember[]> {
  const { store } = deps;
  const paths = taskPaths(deps.tasksDir, task.id);
  const input = JSON.parse(task.canonicalInput) as CanonicalInput;
  const members: TarMember[] = [
    {
      name: 'task.json',
      data: json({
        task_id: task.id, workflow: task.workflow, state: task.state, repo_dir: task.repoDir,
        canonical_input_sha256: task.canonicalInputSha256, created_at: task.createdAt, updated_at: task.updatedAt,
        resume_count: task.resumeCount,
        // Cluster mode: the repository the task ran over, by content (the replay checks against it).
        ...(task.bundleDigest !== null ? { bundle_digest: task.bundleDigest } : {}),
      }),
    },
    { name: 'task-options.json', data: Buffer.from(canonicalJson(task.options), 'utf8') },
    { name: 'canonical-input.json', data: Buffer.from(task.canonicalInput, 'utf8') },
    { name: 'source-policy.json', data: json(sourcePolicy(input)) },
    { name: 'budget-plan.json', data: Buffer.from(task.budgetPlan, 'utf8') },
    { name: 'error.json', data: json(task.error) },
    { name: 'prompts.json', data: json({ version: PROMPTS_VERSION, sha256: promptsSha256() }) },
    { name: 'roster.json', data: json(deps.describeModels(task)) },
  ];
  const attempts = await store.listAttempts(task.id);
  members.push({
    name: 'attempts.json',
    data: json(attempts.map((a) => ({
      stage: a.stage, attempt: a.attempt, status: a.status, started_at: a.startedAt, ended_at: a.endedAt,
      detail: a.detail === null ? null : (JSON.parse(a.detail) as unknown),
      tarball_sha256: a.tarballSha256,
    }))),
  });
  members.push(...attemptMembers(paths.attemptsDir, join(paths.dir, REPLAY_DIR)));
  // Cluster mode: attempts another daemon ran (it may be dead) are not on this disk; their
  // archives in the database stand in for them (attempt-archive.ts).
  for (const a of attempts) {
    const prefix = `attempts/${attemptDirName(a.stage, a.attempt)}`;
    if (members.some((m) => m.name.startsWith(`${prefix}/`))) continue;
    const archived = await archivedAttemptMembers(store, task.id, a.stage, a.attempt);
    if (archived !== null) members.push(...archived.filter((m) => !members.some((have) => have.name === m.name)));
  }

  const anonymization = await store.getCheckpoint(task.id, 'anonymization');
  const candidates = await store.getCheckpoint(task.id, 'candidates');
  const evaluation = await store.getCheckpoint(task.id, 'evaluation');
  if (anonymization !== null) members.push({ name: 'anonymization.json', data: Buffer.from(anonymization, 'utf8') });
  if (anonymization !== null && candidates !== null) {
    const slots = JSON.parse(anonymization) as Record<string, number>;
    const answers = JSON.parse(candidates) as Array<{ slot: number; answer: string }>;
    const blind = LETTERS.map((id) => ({ candidate_id: id, response: answers.find((c) => c.slot === slots[id])?.answer ?? null }));
    members.push({ name: 'blind-candidates.json', data: json(blind) });
  }
  if (evaluation !== null) members.push({ name: 'evaluation.json', data: Buffer.from(evaluation, 'utf8') });

  const result = await store.getResult(task.id);
  if (result !== null) {
    // The row's bytes when the store keeps them (cluster mode: the writer's disk may be another host's).
    const answer = result.answerData ?? regularFile(result.answerPath);
    if (answer !== null) members.push({ name: 'result/answer.md', data: answer });
    members.push({ name: 'result/metadata.json', data: Buffer.from(result.metadata, 'utf8') });
    members.push({
      name: 'result/result-record.json',
      data: json({ answer_sha256: result.answerSha256, answer_bytes: result.answerBytes, metadata_sha256: result.metadataSha256, committed_at: result.committedAt }),
    });
  }
  members.push({ name: 'events.json', data: json((await store.listEvents(task.id)).map((e) => ({ seq: e.seq, at: e.at, kind: e.kind, data: e.data }))) });
  return members;
}

export function buildManifest(taskId: string, state: string, members: readonly TarMember[]): Buffer {
  const entries = members
    .map((m) => ({ name: m.name, bytes: m.data.length, sha256: sha256Hex(m.data) }))
    .sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
  const manifest: TaskManifest = { schema_version: MANIFEST_SCHEMA, task_id: taskId, state, members: entries };
  return json(manifest);
}

/** The tarball bytes and what the database row records about them. */
export async function buildTaskTarball(deps: SealDeps, task: TaskRecord): Promise<Omit<TaskTarballRecord, 'createdAt'>> {
  const members = await collectTaskMembers(deps, task);
  const manifest = buildManifest(task.id, task.state, members);
  const manifestSha256 = sha256Hex(manifest);
  members.push({ name: MANIFEST_MEMBER, data: manifest });
  let signature: string | null = null;
  if (deps.signingKey !== null) {
    signature = signManifestDigest(manifestSha256, deps.signingKey.privateKey);
    const sig: TaskSignature = {
      schema_version: SIGNATURE_SCHEMA, algorithm: 'ed25519', manifest_sha256: manifestSha256,
      public_key_sha256: deps.signingKey.publicKeySha256, public_key: deps.signingKey.publicKeyPem, signature,
    };
    members.push({ name: SIGNATURE_MEMBER, data: json(sig) });
  }
  const data = await packMembers(members);
  return {
    taskId: task.id, sha256: sha256Hex(data), bytes: data.length, manifestSha256, signature,
    publicKeySha256: deps.signingKey?.publicKeySha256 ?? null, data,
  };
}

/**
 * Seals a terminal task once (a second call keeps the first tarball: evidence is never
 * replaced). Returns the stored record, or null when the task is gone or not terminal.
 */
export async function sealTask(deps: SealDeps, taskId: string): Promise<TaskTarballRecord | null> {
  const existing = await deps.store.getTaskTarball(taskId);
  if (existing !== null) return existing;
  const task = await deps.store.getTask(taskId);
  if (task === null) return null;
  if (!['completed', 'failed', 'cancelled'].includes(task.state)) {
    throw new FusionError('task_not_terminal', `task ${taskId} is ${task.state}; only a terminal task is sealed`);
  }
  const built = await buildTaskTarball(deps, task);
  const record: TaskTarballRecord = { ...built, createdAt: new Date().toISOString() };
  const inserted = await deps.store.saveTaskTarball(record);
  if (!inserted) return deps.store.getTaskTarball(taskId);
  deps.onSealed?.({ bytes: record.bytes, signed: record.signature !== null });
  deps.log.info({ taskId, state: task.state, bytes: record.bytes, sha256: record.sha256, signed: record.signature !== null }, 'task tarball sealed');
  return record;
}

/**
 * Once a task's tarball is sealed (and committed), it is the one copy of every attempt: the
 * unpacked attempt directories, the per-attempt `.tar` files and the replay records are removed
 * from the task directory, so each attempt is kept once and disk use stays bounded. What stays: the preflight copies
 * and `result/` (the delivered answer file). bg_result then checks the attempts against the
 * sealed tarball, and `fusion audit verify` re-derives each attempt digest from its members.
 */
export async function pruneSealedAttemptFiles(tasksDir: string, taskId: string): Promise<void> {
  const paths = taskPaths(tasksDir, taskId);
  await rm(paths.attemptsDir, { recursive: true, force: true });
  await rm(join(paths.dir, REPLAY_DIR), { recursive: true, force: true });
}
