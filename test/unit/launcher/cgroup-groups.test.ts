/**
 * The shared `fusion-sandboxes` group directory: another daemon (or the maintenance reaper) may
 * remove it whenever it is empty, so creating a sandbox cgroup in it retries on ENOENT instead
 * of failing the launch (seen as `launch_failed: cannot create the sandbox cgroup: ENOENT` when
 * several daemons ran sandboxes at once).
 */
import { mkdir, mkdtemp, rm, rmdir } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GroupDirs } from '../../../src/launcher/cgroup-groups.js';

let root: string | undefined;
afterEach(async () => {
  if (root !== undefined) await rm(root, { recursive: true, force: true });
});

describe('GroupDirs.create', () => {
  it('recreates the group and retries when a concurrent release removed it', async () => {
    root = await mkdtemp(join(tmpdir(), 'fusion-groups-'));
    const group = join(root, 'fusion-sandboxes');
    const groups = new GroupDirs([group], true);
    let calls = 0;
    const made = await groups.create(async () => {
      calls += 1;
      if (calls <= 3) {
        // Another daemon's releaseIfEmpty wins the race: the group is gone when we mkdir in it.
        await rm(group, { recursive: true, force: true });
      }
      await mkdir(join(group, 'sbx-1'));
      return 'made';
    });
    expect(made).toBe('made');
    expect(calls).toBe(4);
    expect(existsSync(join(group, 'sbx-1'))).toBe(true);
    // The controller line was written again into the recreated group.
    expect(existsSync(join(group, 'cgroup.subtree_control'))).toBe(true);
  });

  it('gives up with the error after repeated losses, and never retries other errors', async () => {
    root = await mkdtemp(join(tmpdir(), 'fusion-groups-'));
    const group = join(root, 'fusion-sandboxes');
    const groups = new GroupDirs([group], false);
    let calls = 0;
    await expect(
      groups.create(async () => {
        calls += 1;
        await rmdir(group);
        await mkdir(join(group, 'sbx'));
      }),
    ).rejects.toMatchObject({ code: 'ENOENT' });
    expect(calls).toBe(11);
    calls = 0;
    const eacces = Object.assign(new Error('denied'), { code: 'EACCES' });
    await expect(groups.create(async () => { calls += 1; throw eacces; })).rejects.toBe(eacces);
    expect(calls).toBe(1);
  });
});
