/**
 * The per-sandbox uid pool (docs/security.md#uid-model): distinct uids for concurrent leases (also
 * across processes sharing the claim directory), never a uid with a live process, never one whose
 * released holder still owns files, takeover of a dead holder's claim, range parsing and checks.
 */
import { chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createUidPool, liveProcessIds, parseUidRange, uidRangeConflicts, validateUidRange } from '../../../src/launcher/uid-pool.js';

const IS_ROOT = process.getuid?.() === 0;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), 'fusion-uid-pool-'));
  dirs.push(dir);
  return dir;
}
const RANGE = { start: 3_000_000, end: 3_000_015 };

describe('uid ranges', () => {
  it('parses START-END and refuses ranges that are unsafe or too small', () => {
    expect(parseUidRange('2100000000-2100065535')).toEqual({ start: 2_100_000_000, end: 2_100_065_535 });
    expect(() => parseUidRange('5-10')).toThrow(/1000/);
    expect(() => parseUidRange('60000-70000')).toThrow(/65534/);
    expect(() => parseUidRange('100000-100003')).toThrow(/too small/);
    expect(() => parseUidRange('abc')).toThrow(/START-END/);
    expect(() => validateUidRange({ start: 2_147_483_600, end: 2_147_483_647 })).toThrow();
  });

  it('reports users, groups and other owners\' subordinate ids inside the range', () => {
    const dir = scratch();
    const files = { passwd: join(dir, 'passwd'), group: join(dir, 'group'), subuid: join(dir, 'subuid'), subgid: join(dir, 'subgid') };
    writeFileSync(files.passwd, 'root:x:0:0::/root:/bin/sh\nsvc:x:3000005:3000005::/:/bin/false\n');
    writeFileSync(files.group, 'root:x:0:\n');
    writeFileSync(files.subuid, 'root:3000000:16\nalice:2999990:20\n');
    writeFileSync(files.subgid, '');
    const conflicts = uidRangeConflicts(RANGE, files);
    expect(conflicts).toHaveLength(2);
    expect(conflicts.join('\n')).toMatch(/user svc/);
    expect(conflicts.join('\n')).toMatch(/alice/);
  });
});

describe('createUidPool', () => {
  it('hands distinct uids to concurrent leases, and skips uids with a live process', async () => {
    const pool = createUidPool({ range: RANGE, claimDir: join(scratch(), 'claims'), liveIds: () => new Set([RANGE.start + 1, RANGE.start + 2]) });
    const leases = await Promise.all(Array.from({ length: 10 }, (_, i) => pool.lease({ label: `t/${i}`, paths: [] })));
    const uids = leases.map((l) => l.uid);
    expect(new Set(uids).size).toBe(10);
    for (const uid of uids) {
      expect(uid).toBeGreaterThanOrEqual(RANGE.start);
      expect(uid).toBeLessThanOrEqual(RANGE.end);
      expect([RANGE.start + 1, RANGE.start + 2]).not.toContain(uid);
    }
    for (const l of leases) expect(l.gid).toBe(l.uid);
    expect(pool.leased().sort()).toEqual([...uids].sort());
    // 14 usable ids: four more fit, the fifth finds none.
    await Promise.all(Array.from({ length: 4 }, () => pool.lease({ label: 'more', paths: [] })));
    await expect(pool.lease({ label: 'one too many', paths: [] })).rejects.toThrow(/no free sandbox uid/);
    leases[0]!.release();
    expect((await pool.lease({ label: 'after release', paths: [] })).uid).toBe(uids[0]);
  });

  it('two pools sharing a claim directory (two daemons) never hand out the same uid', async () => {
    const claimDir = join(scratch(), 'claims');
    const a = createUidPool({ range: RANGE, claimDir, liveIds: () => new Set() });
    const b = createUidPool({ range: RANGE, claimDir, liveIds: () => new Set() });
    const leases = await Promise.all(Array.from({ length: 16 }, (_, i) => (i % 2 === 0 ? a : b).lease({ label: String(i), paths: [] })));
    expect(new Set(leases.map((l) => l.uid)).size).toBe(16);
  });

  it.runIf(IS_ROOT)('a released uid is not reused while a file it was given is still owned by it', async () => {
    const dir = scratch();
    const small = { start: 3_100_000, end: 3_100_015 };
    const pool = createUidPool({ range: small, claimDir: join(dir, 'claims'), liveIds: () => new Set() });
    const outs = Array.from({ length: 16 }, (_, i) => join(dir, `out-${i}`));
    const leases = [];
    for (const out of outs) {
      mkdirSync(out);
      const lease = await pool.lease({ label: out, paths: [out] });
      chownSync(out, lease.uid, lease.gid);
      leases.push(lease);
    }
    for (const lease of leases) lease.release();
    // Every uid is released, but each one's /out still exists and is owned by it.
    await expect(pool.lease({ label: 'x', paths: [] })).rejects.toThrow(/no free sandbox uid/);
    rmSync(outs[3]!, { recursive: true });
    expect((await pool.lease({ label: 'x', paths: [] })).uid).toBe(leases[3]!.uid);
  });

  it('takes over the claim of a holder whose process is gone (a restarted daemon), never one still active', async () => {
    const claimDir = join(scratch(), 'claims');
    mkdirSync(claimDir, { mode: 0o700 });
    const dead = { label: 'old', paths: [], nonce: 'n1', pid: 999_999_999, started: '1', active: true };
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const started = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    const alive = { label: 'live', paths: [], nonce: 'n2', pid: process.pid, started, active: true };
    for (let uid = RANGE.start; uid <= RANGE.end; uid++) writeFileSync(join(claimDir, String(uid)), JSON.stringify(uid === RANGE.start + 7 ? dead : alive));
    const pool = createUidPool({ range: RANGE, claimDir, liveIds: () => new Set() });
    expect((await pool.lease({ label: 'new', paths: [] })).uid).toBe(RANGE.start + 7);
    await expect(pool.lease({ label: 'next', paths: [] })).rejects.toThrow(/no free sandbox uid/);
  });

  it('an active claim of a live process is never taken over', async () => {
    const claimDir = join(scratch(), 'claims');
    const holder = createUidPool({ range: RANGE, claimDir, liveIds: () => new Set() });
    const held = await Promise.all(Array.from({ length: 16 }, () => holder.lease({ label: 'h', paths: [] })));
    const other = createUidPool({ range: RANGE, claimDir, liveIds: () => new Set() });
    await expect(other.lease({ label: 'o', paths: [] })).rejects.toThrow(/no free sandbox uid/);
    held[5]!.release();
    expect((await other.lease({ label: 'o', paths: [] })).uid).toBe(held[5]!.uid);
  });

  it('counts the ids of running and sleeping processes, never a zombie\'s (it holds them in name only)', () => {
    const proc = scratch();
    const status = (state: string, id: number): string => `Name:\tx\nState:\t${state}\nUid:\t${id}\t${id}\t${id}\t${id}\nGid:\t${id}\t${id}\t${id}\t${id}\n`;
    for (const [pid, state, id] of [[10, 'S (sleeping)', RANGE.start], [11, 'R (running)', RANGE.start + 1], [12, 'Z (zombie)', RANGE.start + 2]] as const) {
      mkdirSync(join(proc, String(pid)));
      writeFileSync(join(proc, String(pid), 'status'), status(state, id));
    }
    const ids = liveProcessIds(proc);
    expect(ids.has(RANGE.start)).toBe(true);
    expect(ids.has(RANGE.start + 1)).toBe(true);
    expect(ids.has(RANGE.start + 2)).toBe(false);
  });
});
