import { chmodSync, mkdirSync, readFileSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { extract, pack, type Headers } from 'tar-fs';
import { pipeline } from 'node:stream/promises';
import { createReadStream } from 'node:fs';
import { Writable } from 'node:stream';
import { listAttemptFiles, packAttempt, verifyTarball } from '../../../src/audit/tarball.js';
import { FusionError } from '../../../src/errors.js';
import { sha256, tempDir } from './log-fixtures.js';

let root: string;
let cleanup: () => void;
let attempt: string;

beforeEach(() => {
  ({ dir: root, cleanup } = tempDir('fusion-tarball-'));
  attempt = join(root, 'candidate-1.attempt-1');
  mkdirSync(attempt);
  writeFileSync(join(attempt, 'candidate-1.attempt-1.tool-calls.jsonl'), '{"a":1}\n');
  writeFileSync(join(attempt, 'candidate-1.attempt-1.tool-calls.jsonl.seal.json'), '{"b":2}\n');
  writeFileSync(join(attempt, 'answer.md'), '# Answer\n');
  writeFileSync(join(attempt, 'request.json'), '{}');
});
afterEach(() => cleanup());

async function expectArtifactError(promise: Promise<unknown>, pattern: RegExp): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(FusionError);
  expect((error as FusionError).code).toBe('artifact_error');
  expect((error as FusionError).message).toMatch(pattern);
}

describe('packAttempt', () => {
  it('packs every regular file, sorted, and reports the digest of the bytes written', async () => {
    const packed = await packAttempt(attempt, join(root, 'a.tar'));
    expect(packed.files).toEqual([
      'answer.md',
      'candidate-1.attempt-1.tool-calls.jsonl',
      'candidate-1.attempt-1.tool-calls.jsonl.seal.json',
      'request.json',
    ]);
    const bytes = readFileSync(packed.path);
    expect(packed.bytes).toBe(bytes.length);
    expect(packed.sha256).toBe(sha256(bytes));
  });

  it('is deterministic: same files, different mtimes and modes → same digest', async () => {
    const first = await packAttempt(attempt, join(root, 'a.tar'));
    utimesSync(join(attempt, 'answer.md'), new Date('2030-01-01'), new Date('2030-01-01'));
    chmodSync(join(attempt, 'request.json'), 0o640);
    const second = await packAttempt(attempt, join(root, 'b.tar'));
    expect(second.sha256).toBe(first.sha256);
    expect(readFileSync(second.path).equals(readFileSync(first.path))).toBe(true);
  });

  it('round-trips through extraction with normalised headers', async () => {
    const packed = await packAttempt(attempt, join(root, 'a.tar'));
    const out = join(root, 'out');
    mkdirSync(out);
    const headers: Array<{ name: string; mtime: Date; uid: number; gid: number; mode: number }> = [];
    await pipeline(
      createReadStream(packed.path),
      extract(out, {
        map: (header) => {
          headers.push({ name: header.name, mtime: header.mtime, uid: header.uid, gid: header.gid, mode: header.mode });
          return header;
        },
      }),
    );
    expect(readFileSync(join(out, 'answer.md'), 'utf8')).toBe('# Answer\n');
    for (const header of headers) {
      expect(header.mtime.getTime()).toBe(0);
      expect([header.uid, header.gid, header.mode & 0o777]).toEqual([0, 0, 0o600]);
    }
  });

  it('skips symlinks and directories, never following them', async () => {
    const secret = join(root, 'secret.txt');
    writeFileSync(secret, 'TOP SECRET');
    symlinkSync(secret, join(attempt, 'link.txt'));
    mkdirSync(join(attempt, 'subdir'));
    writeFileSync(join(attempt, 'subdir', 'nested.txt'), 'nested');
    expect(await listAttemptFiles(attempt)).not.toContain('link.txt');
    const packed = await packAttempt(attempt, join(root, 'a.tar'));
    expect(packed.files).not.toContain('link.txt');
    expect(readFileSync(packed.path).includes(Buffer.from('TOP SECRET'))).toBe(false);
    expect(readFileSync(packed.path).includes(Buffer.from('nested'))).toBe(false);
  });

  it('never packs the output file into itself when it lives in the attempt dir', async () => {
    const packed = await packAttempt(attempt, join(attempt, 'attempt.tar'));
    expect(packed.files).not.toContain('attempt.tar');
    await verifyTarball(packed.path, packed.sha256);
  });

  it('writes the bytes tar-fs wrote for the same files (the format every recorded attempt digest is over)', async () => {
    writeFileSync(join(attempt, 'big.log'), Buffer.alloc(70_000, 7));
    writeFileSync(join(attempt, 'empty'), '');
    const packed = await packAttempt(attempt, join(root, 'a.tar'));
    // tar-fs with the normalisation the packer used before the one codec (common/ustar.ts).
    const epoch = new Date(0);
    const normalise = (h: Headers): Headers => ({ name: h.name, size: h.size, type: h.type, mode: 0o600, mtime: epoch, uid: 0, gid: 0 });
    const chunks: Buffer[] = [];
    await pipeline(pack(attempt, { entries: packed.files, map: normalise, strict: true }), new Writable({ write(c: Buffer, _e, cb) { chunks.push(c); cb(); } }));
    expect(readFileSync(packed.path).equals(Buffer.concat(chunks))).toBe(true);
  });

  it('refuses to overwrite an existing output file', async () => {
    writeFileSync(join(root, 'a.tar'), 'old');
    await expect(packAttempt(attempt, join(root, 'a.tar'))).rejects.toThrow(/EEXIST/);
    expect(readFileSync(join(root, 'a.tar'), 'utf8')).toBe('old');
  });
});

describe('verifyTarball', () => {
  it('accepts the recorded digest', async () => {
    const packed = await packAttempt(attempt, join(root, 'a.tar'));
    expect(await verifyTarball(packed.path, packed.sha256)).toEqual({ sha256: packed.sha256, bytes: packed.bytes });
  });

  it('detects a single changed byte', async () => {
    const packed = await packAttempt(attempt, join(root, 'a.tar'));
    const bytes = readFileSync(packed.path);
    const at = bytes.indexOf(Buffer.from('# Answer'));
    bytes[at + 2] = 'a'.charCodeAt(0);
    writeFileSync(packed.path, bytes);
    await expectArtifactError(verifyTarball(packed.path, packed.sha256), /digest mismatch/);
  });

  it('detects a changed source file on repack', async () => {
    const first = await packAttempt(attempt, join(root, 'a.tar'));
    writeFileSync(join(attempt, 'answer.md'), '# Answer!\n');
    const second = await packAttempt(attempt, join(root, 'b.tar'));
    expect(second.sha256).not.toBe(first.sha256);
  });

  it('missing file, symlink, bad digest', async () => {
    const packed = await packAttempt(attempt, join(root, 'a.tar'));
    await expectArtifactError(verifyTarball(join(root, 'nope.tar'), packed.sha256), /missing/);
    symlinkSync(packed.path, join(root, 'link.tar'));
    await expectArtifactError(verifyTarball(join(root, 'link.tar'), packed.sha256), /not a regular file/);
    await expectArtifactError(verifyTarball(packed.path, packed.sha256.toUpperCase()), /lowercase hex/);
  });
});
