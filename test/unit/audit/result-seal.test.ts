import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../../src/contracts/canonical.js';
import { createResultSealCheck } from '../../../src/audit/result-seal.js';
import { signManifestDigest } from '../../../src/audit/signing.js';
import { buildManifest, MANIFEST_MEMBER } from '../../../src/audit/task-tarball.js';
import { packMembers, type TarMember } from '../../../src/audit/tar-members.js';
import type { Store, TaskRecord, TaskTarballRecord } from '../../../src/store/port.js';

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
    await expect(createResultSealCheck(store, publicKey)(taskRecord('task-b'), sha256Hex(Buffer.from('answer B')), '{"m":"B"}')).resolves.toBeUndefined();
  });

  it("refuses another task's signed tarball swapped in with its answer and metadata (artifact_error)", async () => {
    const b = await sealed('task-b', 'answer B', '{"m":"B"}');
    // Task A's row now holds B's tarball, and A's answer/metadata were rewritten to B's.
    const store = { getTaskTarball: async (id: string) => (id === 'task-a' ? b : null) } as unknown as Store;
    await expect(createResultSealCheck(store, publicKey)(taskRecord('task-a'), sha256Hex(Buffer.from('answer B')), '{"m":"B"}')).rejects.toMatchObject({ code: 'artifact_error' });
  });
});
