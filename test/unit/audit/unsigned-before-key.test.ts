import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { initSigningKey } from '../../../src/audit/signing.js';
import { loadUnsignedBeforeKey, unsignedBeforeKeyPath, writeUnsignedBeforeKey } from '../../../src/audit/unsigned-before-key.js';

const dirs: string[] = [];
const fresh = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'fusion-unsigned-before-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('the signed list of tasks sealed unsigned before the signing key', () => {
  it('is written by the key being created, before the key files exist, and loads back under that key', () => {
    const home = fresh();
    const key = initSigningKey(home, (k) => {
      expect(() => readFileSync(join(home, 'signing-key.pem'))).toThrow();
      writeUnsignedBeforeKey(home, k, [{ taskId: 'investigate-b', sha256: 'b'.repeat(64) }, { taskId: 'investigate-a', sha256: 'a'.repeat(64) }], '2026-01-02T03:04:05.000Z');
    });
    const list = loadUnsignedBeforeKey(home, key.publicKey)!;
    expect(list.createdAt).toBe('2026-01-02T03:04:05.000Z');
    expect([...list.tasks]).toEqual([['investigate-a', 'a'.repeat(64)], ['investigate-b', 'b'.repeat(64)]]);
  });

  it('is absent (null) when the key has none', () => {
    const home = fresh();
    expect(loadUnsignedBeforeKey(home, initSigningKey(home).publicKey)).toBeNull();
  });

  it('refuses a list with a task added, one signed by another key, and a symlink (invalid_config naming the file)', () => {
    const home = fresh();
    const key = initSigningKey(home, (k) => void writeUnsignedBeforeKey(home, k, [{ taskId: 'investigate-a', sha256: 'a'.repeat(64) }], '2026-01-02T03:04:05.000Z'));
    const file = unsignedBeforeKeyPath(home);
    const original = readFileSync(file, 'utf8');
    const parsed = JSON.parse(original) as { tasks: unknown[] };
    writeFileSync(file, JSON.stringify({ ...parsed, tasks: [...parsed.tasks, { task_id: 'investigate-x', tarball_sha256: 'c'.repeat(64) }] }));
    expect(() => loadUnsignedBeforeKey(home, key.publicKey)).toThrow(/does not verify/);

    const other = fresh();
    const otherKey = initSigningKey(other, (k) => void writeUnsignedBeforeKey(other, k, [], '2026-01-02T03:04:05.000Z'));
    writeFileSync(file, readFileSync(unsignedBeforeKeyPath(other)));
    expect(() => loadUnsignedBeforeKey(home, key.publicKey)).toThrow(new RegExp(`signed by key sha256:${otherKey.publicKeySha256}, not by this signing key`));

    rmSync(file);
    writeFileSync(join(home, 'elsewhere.json'), original);
    symlinkSync(join(home, 'elsewhere.json'), file);
    expect(() => loadUnsignedBeforeKey(home, key.publicKey)).toThrow(/is not a regular file/);
  });
});
