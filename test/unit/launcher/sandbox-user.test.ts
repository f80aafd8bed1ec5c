/**
 * Sandbox identity (never root) and the permission pre-check for bound host paths.
 */
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCESS, accessProblem, permittedBits, resolveSandboxIdentity } from '../../../src/launcher/sandbox-user.js';

describe('resolveSandboxIdentity', () => {
  it('a root daemon drops privileges; the stand-in uid is the range start (each launch leases its own)', () => {
    expect(resolveSandboxIdentity({ start: 2_100_000_000 }, { uid: 0, gid: 0 })).toEqual({ uid: 2_100_000_000, gid: 2_100_000_000, dropPrivileges: true });
  });

  it("keeps a non-root daemon's own uid", () => {
    expect(resolveSandboxIdentity({ start: 2_100_000_000 }, { uid: 1000, gid: 1000 })).toEqual({ uid: 1000, gid: 1000, dropPrivileges: false });
  });
});

describe('permittedBits', () => {
  const info = { mode: 0o40751, uid: 10, gid: 20 };
  it('picks owner, group or other bits', () => {
    expect(permittedBits(info, 10, 99)).toBe(7);
    expect(permittedBits(info, 11, 20)).toBe(5);
    expect(permittedBits(info, 11, 21)).toBe(1);
  });
});

describe('accessProblem', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'fusion-access-'));
    await chmod(root, 0o755);
    await mkdir(join(root, 'open'), { mode: 0o755 });
    await mkdir(join(root, 'closed'), { mode: 0o700 });
    await mkdir(join(root, 'closed', 'inner'), { mode: 0o755 });
    await writeFile(join(root, 'open', 'file'), 'x', { mode: 0o644 });
    await chmod(join(root, 'closed'), 0o700);
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  // uid/gid 4242 own nothing here: only the "other" bits apply (files are owned by the test's uid).
  const stranger = { uid: 4242, gid: 4242 };

  it('accepts a world-readable directory and file', async () => {
    expect(await accessProblem(join(root, 'open'), stranger.uid, stranger.gid, ACCESS.readDir)).toBeNull();
    expect(await accessProblem(join(root, 'open', 'file'), stranger.uid, stranger.gid, ACCESS.read)).toBeNull();
  });

  it('names an ancestor that is not searchable', async () => {
    const problem = await accessProblem(join(root, 'closed', 'inner'), stranger.uid, stranger.gid, ACCESS.readDir);
    expect(problem).toContain(`${join(root, 'closed')} (an ancestor`);
  });

  it('names missing permission bits and missing paths', async () => {
    expect(await accessProblem(join(root, 'open'), stranger.uid, stranger.gid, ACCESS.writeDir)).toMatch(/grants r-x .* needs rwx/);
    expect(await accessProblem(join(root, 'nope'), stranger.uid, stranger.gid, ACCESS.read)).toMatch(/does not exist/);
  });
});
