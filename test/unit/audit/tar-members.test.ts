import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { pack, type Headers } from 'tar-fs';
import { describe, expect, it } from 'vitest';
import { firstDifferenceFromPack, memberAt, packMembers, readMembers } from '../../../src/audit/tar-members.js';

const members = [
  { name: 'b.txt', data: Buffer.from('hello\n') },
  { name: 'attempts/candidate-1.attempt-1/candidate-1.attempt-1.tool-calls.jsonl.seal.json', data: Buffer.from('x'.repeat(700)) },
  { name: 'empty.json', data: Buffer.alloc(0) },
];

describe('deterministic member tarballs', () => {
  it('packs the same members to the same bytes, whatever their order', async () => {
    const a = await packMembers(members);
    const b = await packMembers([...members].reverse());
    expect(a.equals(b)).toBe(true);
    const read = readMembers(a);
    expect(read.map((m) => m.name)).toEqual(['attempts/candidate-1.attempt-1/candidate-1.attempt-1.tool-calls.jsonl.seal.json', 'b.txt', 'empty.json']);
    expect(read[1]!.data.toString()).toBe('hello\n');
    expect(memberAt(read, read[1]!.offset + 3)).toBe('b.txt');
    expect(memberAt(read, a.length - 1)).toBe('(end-of-archive blocks)');
  });

  it('writes the bytes tar-fs wrote for the same members, so task tarballs sealed before the one codec still verify', async () => {
    const all = [...members, { name: `${'d'.repeat(120)}/${'a'.repeat(100)}`, data: Buffer.alloc(513, 3) }];
    const names = all.map((m) => m.name).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    const dir = mkdtempSync(join(tmpdir(), 'fusion-tar-oracle-'));
    try {
      for (const m of all) {
        mkdirSync(dirname(join(dir, m.name)), { recursive: true });
        writeFileSync(join(dir, m.name), m.data);
      }
      const epoch = new Date(0);
      const normalise = (h: Headers): Headers => ({ name: h.name, size: h.size, type: h.type, mode: 0o600, mtime: epoch, uid: 0, gid: 0 });
      const chunks: Buffer[] = [];
      await pipeline(pack(dir, { entries: names, map: normalise, strict: true }), new Writable({ write(c: Buffer, _e, cb) { chunks.push(c); cb(); } }));
      expect((await packMembers(all)).equals(Buffer.concat(chunks))).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses unsafe or duplicate names', async () => {
    await expect(packMembers([{ name: '../x', data: Buffer.alloc(1) }])).rejects.toThrow(/unsafe/);
    await expect(packMembers([{ name: 'a', data: Buffer.alloc(1) }, { name: 'a', data: Buffer.alloc(2) }])).rejects.toThrow(/duplicate/);
  });

  it('names the member of a corrupt header, and refuses a truncated archive', async () => {
    const tar = await packMembers(members);
    const read = readMembers(tar);
    const bad = Buffer.from(tar);
    bad[read[1]!.offset + 10]! ^= 1;
    expect(() => readMembers(bad)).toThrow(/checksum mismatch/);
    expect(() => readMembers(tar.subarray(0, read[1]!.end))).toThrow(/truncated/);
  });

  it('refuses names that would need a PAX header (which the reader refuses) or hold control characters', async () => {
    const dir = 'attempts/candidate-1.attempt-1/';
    const ok = await packMembers([{ name: `${dir}${'a'.repeat(100)}`, data: Buffer.from('x') }]);
    expect(readMembers(ok).map((m) => m.name)).toEqual([`${dir}${'a'.repeat(100)}`]);
    for (const name of [`${dir}${'a'.repeat(101)}`, `${dir}${'é'.repeat(20)}`, `${dir}x\u001b[2Ky`, 'a'.repeat(101)]) {
      await expect(packMembers([{ name, data: Buffer.from('x') }]), JSON.stringify(name)).rejects.toThrow(/unsafe tar member name/);
    }
  });
});

describe('firstDifferenceFromPack (the streamed canonical-bytes check of audit verify)', () => {
  it('is -1 for the canonical bytes, and the first differing offset otherwise (a changed byte, trailing bytes, a short archive)', async () => {
    const members = [{ name: 'a.txt', data: Buffer.from('hello') }, { name: 'b/c.json', data: Buffer.alloc(3000, 7) }];
    const tar = await packMembers(members);
    expect(await firstDifferenceFromPack(readMembers(tar), tar)).toBe(-1);
    const flipped = Buffer.from(tar);
    flipped[512 + 10] = 1; // padding after a.txt's data
    expect(await firstDifferenceFromPack(members, flipped)).toBe(522);
    expect(await firstDifferenceFromPack(members, Buffer.concat([tar, Buffer.alloc(512)]))).toBe(tar.length);
    expect(await firstDifferenceFromPack(members, tar.subarray(0, tar.length - 512))).toBe(tar.length - 512);
  });
});
