import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../../src/contracts/canonical.js';
import { createAttemptRecordCheck, createResultSealCheck } from '../../../src/audit/result-seal.js';
import { signManifestDigest } from '../../../src/audit/signing.js';
import { buildManifest, MANIFEST_MEMBER } from '../../../src/audit/task-tarball.js';
import { packMembers, type TarMember } from '../../../src/audit/tar-members.js';
import type { Store, TaskRecord, TaskTarballRecord } from '../../../src/store/port.js';
import type { UnsignedBeforeKey } from '../../../src/audit/unsigned-before-key.js';

const { privateKey, publicKey } = generateKeyPairSync('ed25519');

async function sealed(taskId: string, answer: string, metadata: string): Promise<TaskTarballRecord> {
  const members: TarMember[] = [
    { name: 'result/answer.md', data: Buffer.from(answer) },
    { name: 'result/metadata.json', data: Buffer.from(metadata) },
  ];
  const manifest = buildManifest(taskId, 'completed', members);
  const manifestSha256 = sha256Hex(manifest);
  const data = await packMembers([...members, { name: MANIFEST_MEMBER, data: manifest }]);
  return { taskId, sha256: sha256Hex(data), bytes: data.length, manifestSha256, signature: signManifestDigest(manifestSha256, privateKey), publicKeySha256: 'x'.repeat(64), createdAt: new Date().toISOString(), data };
}

const taskRecord = (id: string): TaskRecord => ({ id, state: 'completed', updatedAt: new Date(0).toISOString() }) as unknown as TaskRecord;

describe('result seal check (bg_result with a signing key)', () => {
  it('accepts the signed tarball of the task itself', async () => {
    const b = await sealed('task-b', 'answer B', '{"m":"B"}');
    const store = { getTaskTarball: async () => b } as unknown as Store;
    await expect(createResultSealCheck(store, publicKey)(taskRecord('task-b'), sha256Hex(Buffer.from('answer B')), '{"m":"B"}')).resolves.toEqual({ signed: true });
  });

  it("refuses another task's signed tarball swapped in with its answer and metadata (artifact_error)", async () => {
    const b = await sealed('task-b', 'answer B', '{"m":"B"}');
    // Task A's row now holds B's tarball, and A's answer/metadata were rewritten to B's.
    const store = { getTaskTarball: async (id: string) => (id === 'task-a' ? b : null) } as unknown as Store;
    await expect(createResultSealCheck(store, publicKey)(taskRecord('task-a'), sha256Hex(Buffer.from('answer B')), '{"m":"B"}')).rejects.toMatchObject({ code: 'artifact_error' });
  });
});

describe('attempt record check (bg_result once the attempt files are pruned)', () => {
  const digest = 'a'.repeat(64);
  async function withAttempts(taskId: string, extra: TarMember[] = []): Promise<TaskTarballRecord> {
    const members: TarMember[] = [
      { name: 'attempts.json', data: Buffer.from(JSON.stringify([{ stage: 'candidate-1', attempt: 1, status: 'succeeded', tarball_sha256: digest }])) },
      { name: 'attempts/candidate-1.attempt-1/answer.md', data: Buffer.from('answer') },
      ...extra,
    ];
    const manifest = buildManifest(taskId, 'completed', members);
    const data = await packMembers([...members, { name: MANIFEST_MEMBER, data: manifest }]);
    return { taskId, sha256: sha256Hex(data), bytes: data.length, manifestSha256: sha256Hex(manifest), signature: null, publicKeySha256: null, createdAt: new Date().toISOString(), data };
  }
  const attempt = { stage: 'candidate-1', attempt: 1, tarballPath: '/gone.tar', tarballSha256: digest };

  it('checks the attempts against the sealed tarball; false when there is none (the files on disk are checked)', async () => {
    const t = await withAttempts('task-a');
    const store = { getTaskTarball: async (id: string) => (id === 'task-a' ? t : null) } as unknown as Store;
    await expect(createAttemptRecordCheck(store)(taskRecord('task-a'), [attempt])).resolves.toBe(true);
    await expect(createAttemptRecordCheck(store)(taskRecord('task-b'), [attempt])).resolves.toBe(false);
  });

  it('refuses a different attempt digest, missing attempt files, a changed member or damaged bytes (artifact_error)', async () => {
    const t = await withAttempts('task-a');
    const store = { getTaskTarball: async () => t } as unknown as Store;
    const check = createAttemptRecordCheck(store);
    await expect(check(taskRecord('task-a'), [{ ...attempt, tarballSha256: 'b'.repeat(64) }])).rejects.toMatchObject({ code: 'artifact_error' });
    await expect(check(taskRecord('task-a'), [{ ...attempt, stage: 'candidate-2' }])).rejects.toMatchObject({ code: 'artifact_error' });
    await expect(check(taskRecord('task-b'), [attempt])).rejects.toMatchObject({ code: 'artifact_error' });
    const flipped = Buffer.from(t.data);
    flipped[flipped.length - 2048] = (flipped[flipped.length - 2048] ?? 0) ^ 1;
    const damaged = { getTaskTarball: async () => ({ ...t, data: flipped }) } as unknown as Store;
    await expect(createAttemptRecordCheck(damaged)(taskRecord('task-a'), [attempt])).rejects.toMatchObject({ code: 'artifact_error' });
  });
});

describe('result seal check: a task sealed unsigned before the signing key', () => {
  async function unsignedSealed(taskId: string, answer: string, metadata: string): Promise<TaskTarballRecord> {
    const signed = await sealed(taskId, answer, metadata);
    return { ...signed, signature: null, publicKeySha256: null };
  }
  const listOf = (entries: Record<string, string>): UnsignedBeforeKey => ({ file: '/data/signing-key.unsigned-before.json', createdAt: '2026-01-02T03:04:05.000Z', publicKeySha256: 'k'.repeat(64), tasks: new Map(Object.entries(entries)) });

  it('delivers a listed task with its recorded tarball as unsigned, sealed before the key', async () => {
    const t = await unsignedSealed('task-a', 'answer A', '{"m":"A"}');
    const store = { getTaskTarball: async () => t } as unknown as Store;
    await expect(createResultSealCheck(store, publicKey, listOf({ 'task-a': t.sha256 }))(taskRecord('task-a'), sha256Hex(Buffer.from('answer A')), '{"m":"A"}'))
      .resolves.toEqual({ signed: false, sealedBeforeKey: '2026-01-02T03:04:05.000Z' });
  });

  it('refuses an unsigned tarball of a task not on the list, one whose bytes changed, and any with no list (artifact_error naming why)', async () => {
    const t = await unsignedSealed('task-a', 'answer A', '{"m":"A"}');
    const store = { getTaskTarball: async () => t } as unknown as Store;
    const check = (list: UnsignedBeforeKey | null) => createResultSealCheck(store, publicKey, list)(taskRecord('task-a'), sha256Hex(Buffer.from('answer A')), '{"m":"A"}');
    await expect(check(listOf({ 'task-b': t.sha256 }))).rejects.toThrow(/not signed, and the task is not among the tasks sealed before the signing key was created \(2026-01-02T03:04:05.000Z\)/);
    await expect(check(listOf({ 'task-a': 'f'.repeat(64) }))).rejects.toThrow(/differs from the one recorded when the signing key was created/);
    await expect(check(null)).rejects.toMatchObject({ code: 'artifact_error', message: expect.stringMatching(/no list of tasks sealed before the signing key exists/) });
  });

  it('a listed tarball must still name this answer', async () => {
    const t = await unsignedSealed('task-a', 'answer A', '{"m":"A"}');
    const store = { getTaskTarball: async () => t } as unknown as Store;
    await expect(createResultSealCheck(store, publicKey, listOf({ 'task-a': t.sha256 }))(taskRecord('task-a'), sha256Hex(Buffer.from('forged')), '{"m":"A"}'))
      .rejects.toThrow(/the answer differs from the task tarball sealed before the signing key/);
  });
});
