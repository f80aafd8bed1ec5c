/**
 * Attempt archives (src/audit/attempt-archive.ts) over a real store: a task tarball sealed by a
 * daemon that has none of the attempts on its disk (they come from the archives in the
 * database) is byte for byte the one sealed from the attempt directories, and verifies offline.
 * SQLite here (the SQL is the same on PostgreSQL; the cluster e2e test runs it there).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { FusionError } from '../../../src/errors.js';
import { canonicalJson, buildCanonicalInput, sha256Hex } from '../../../src/contracts/canonical.js';
import { normalizeToolInput } from '../../../src/contracts/tool-input.js';
import { packAttempt } from '../../../src/audit/tarball.js';
import { ATTEMPT_ARCHIVE_SCHEMA, archiveAttempt, archivedAttemptMembers, attemptArchiveKey } from '../../../src/audit/attempt-archive.js';
import { buildTaskTarball, type SealDeps } from '../../../src/audit/task-tarball.js';
import { readMembers } from '../../../src/audit/tar-members.js';
import { verifyTaskTarball } from '../../../src/audit/offline-verify.js';
import { REPLAY_DIR } from '../../../src/audit/replay.js';
import { attemptDirName, taskPaths } from '../../../src/tasks/paths.js';
import type { SqliteStore } from '../../../src/store/sqlite-store.js';
import { newTask, openStore, tempDir, type TempDir } from '../store/helpers.js';

let tmp: TempDir;
let store: SqliteStore;
beforeEach(async () => {
  tmp = await tempDir();
  store = await openStore(tmp.file);
});
afterEach(async () => {
  await store.close();
  await tmp.cleanup();
});

const deps = (tasksDir: string): SealDeps => ({ store, tasksDir, signingKey: null, describeModels: () => ({ source: 'test' }), log: silentLogger() });

it('a tarball sealed from the archives equals the one sealed from the attempt directories, and verifies', async () => {
  const args = normalizeToolInput('investigate', { objective: 'find the refill', background: ['bursts'], deliverable: 'the lines' });
  const input = canonicalJson(buildCanonicalInput({ workflow: 'investigate', cwd: '/srv/repo', args }));
  const task = await store.createTask(newTask({ canonicalInput: input, canonicalInputSha256: sha256Hex(input) }));
  // The host that ran the attempts: two attempt directories, packed, one with a replay record.
  const ranOn = join(tmp.dir, 'host-a', 'tasks');
  for (const stage of ['evaluator', 'merger']) {
    const rec = await store.startAttempt(task.id, stage);
    const dir = join(taskPaths(ranOn, task.id).attemptsDir, attemptDirName(stage, rec.attempt));
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'answer.md'), `${stage} answer\n`);
    writeFileSync(join(dir, 'result.json'), '{"status":"answered"}\n');
    if (stage === 'merger') {
      mkdirSync(join(taskPaths(ranOn, task.id).dir, REPLAY_DIR), { recursive: true });
      writeFileSync(join(taskPaths(ranOn, task.id).dir, REPLAY_DIR, `${attemptDirName(stage, rec.attempt)}.json`), '{"calls":[]}\n');
    }
    const packed = await packAttempt(dir, `${dir}.tar`);
    await archiveAttempt(store, ranOn, task.id, stage, rec.attempt, packed.path);
    await store.finishAttempt(task.id, stage, rec.attempt, { status: 'succeeded', tarballPath: packed.path, tarballSha256: packed.sha256 });
  }
  expect(await store.transitionTask(task.id, 'initializing', 'failed', { error: { code: 'child_failed', message: 'x', state: 'initializing' } })).not.toBeNull();
  const failed = (await store.getTask(task.id))!;

  const fromDisk = await buildTaskTarball(deps(ranOn), failed);
  const elsewhere = join(tmp.dir, 'host-b', 'tasks');
  mkdirSync(elsewhere, { recursive: true });
  const fromArchives = await buildTaskTarball(deps(elsewhere), failed);
  expect(fromArchives.sha256).toBe(fromDisk.sha256);
  const names = readMembers(fromArchives.data).map((m) => m.name);
  expect(names).toEqual(expect.arrayContaining([
    'attempts/evaluator.attempt-1/answer.md', 'attempts/merger.attempt-1/result.json', 'attempts/merger.attempt-1.replay.json',
  ]));
  const report = await verifyTaskTarball(fromArchives.data);
  expect(report.ok, JSON.stringify(report.failure)).toBe(true);

  // No archive, nothing invented: the sealer reads only what was stored.
  expect(await archivedAttemptMembers(store, task.id, 'repair', 1)).toBeNull();
  expect(await store.getCheckpoint(task.id, attemptArchiveKey('evaluator', 1))).not.toBeNull();
});

it('a hostile archive in the database is refused, not sealed: a gzip bomb past the bound, bytes that are not the recorded tar', async () => {
  const input = canonicalJson(buildCanonicalInput({ workflow: 'investigate', cwd: '/srv/repo', args: normalizeToolInput('investigate', { objective: 'o', background: ['b'], deliverable: 'd' }) }));
  const task = await store.createTask(newTask({ canonicalInput: input, canonicalInputSha256: sha256Hex(input) }));
  const save = (stage: string, tar: Buffer, recorded: string): Promise<void> => store.saveCheckpoint(task.id, attemptArchiveKey(stage, 1), JSON.stringify({
    schema_version: ATTEMPT_ARCHIVE_SCHEMA, tar_sha256: recorded, tar_gzip_base64: gzipSync(tar).toString('base64'), replay: null,
  }));
  // 8 MiB of zeros gzip to a few KiB: inflating past the bound stops there.
  const zeros = Buffer.alloc(8 * 1024 * 1024);
  await save('evaluator', zeros, sha256Hex(zeros));
  const bomb = await archivedAttemptMembers(store, task.id, 'evaluator', 1, { maxBytes: 1024 * 1024 }).catch((e: unknown) => e as FusionError);
  expect(bomb).toBeInstanceOf(FusionError);
  expect((bomb as FusionError).message).toMatch(/more than 1048576 bytes/u);
  // Another tar than the one whose digest the archive records (a swapped row).
  const dir = join(tmp.dir, 'x');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'answer.md'), 'forged\n');
  const packed = await packAttempt(dir, `${dir}.tar`);
  await save('merger', readFileSync(packed.path), sha256Hex(Buffer.from('the original tar')));
  const swapped = await archivedAttemptMembers(store, task.id, 'merger', 1).catch((e: unknown) => e as FusionError);
  expect(swapped).toBeInstanceOf(FusionError);
  expect((swapped as FusionError).message).toMatch(/does not match/u);
});
