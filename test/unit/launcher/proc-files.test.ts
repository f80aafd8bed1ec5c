/**
 * Parsing of /proc/self/mountinfo and /proc/self/cgroup, and where the sandbox cgroups go.
 */
import { describe, expect, it } from 'vitest';
import { cgroupDir, parseCgroupMounts, parseKeyValues, parseProcCgroup, v1ControllerDir, v2Dir } from '../../../src/launcher/proc-files.js';

// A hybrid host (this project's CI VM): v1 controllers plus an empty cgroup2 "unified" mount.
const HYBRID_MOUNTINFO = `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`;
const HYBRID_CGROUP = `9:name=systemd:/
8:pids:/
4:memory:/process_api/a726
1:cpu:/
0::/
`;

// A pure cgroup2 host running the daemon as a systemd service.
const V2_MOUNTINFO = '35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n';
const V2_CGROUP = '0::/system.slice/fusion.service\n';

describe('cgroup discovery', () => {
  it('parses cgroup mounts, skipping other filesystems', () => {
    const mounts = parseCgroupMounts(HYBRID_MOUNTINFO);
    expect(mounts.map((m) => [m.mountPoint, m.fsType])).toEqual([
      ['/sys/fs/cgroup/cpu', 'cgroup'], ['/sys/fs/cgroup/memory', 'cgroup'], ['/sys/fs/cgroup/pids', 'cgroup'],
      ['/sys/fs/cgroup/systemd', 'cgroup'], ['/sys/fs/cgroup/unified', 'cgroup2'],
    ]);
    expect(mounts[1]?.superOptions).toContain('memory');
  });

  it('decodes octal escapes in mount points', () => {
    const [mount] = parseCgroupMounts('1 2 0:1 / /mnt/with\\040space rw - cgroup2 cgroup2 rw\n');
    expect(mount?.mountPoint).toBe('/mnt/with space');
  });

  it('parses /proc/self/cgroup', () => {
    expect(parseProcCgroup(HYBRID_CGROUP)).toContainEqual({ hierarchyId: '4', controllers: ['memory'], path: '/process_api/a726' });
    expect(parseProcCgroup(V2_CGROUP)).toEqual([{ hierarchyId: '0', controllers: [], path: '/system.slice/fusion.service' }]);
  });

  it('locates the daemon\'s v1 memory and pids cgroups', () => {
    const mounts = parseCgroupMounts(HYBRID_MOUNTINFO);
    const entries = parseProcCgroup(HYBRID_CGROUP);
    expect(v1ControllerDir(mounts, entries, 'memory')).toBe('/sys/fs/cgroup/memory/process_api/a726');
    expect(v1ControllerDir(mounts, entries, 'pids')).toBe('/sys/fs/cgroup/pids');
    expect(v1ControllerDir(mounts, entries, 'blkio')).toBeNull();
    expect(v2Dir(mounts, entries)).toBe('/sys/fs/cgroup/unified');
  });

  it('locates the daemon\'s v2 cgroup', () => {
    expect(v2Dir(parseCgroupMounts(V2_MOUNTINFO), parseProcCgroup(V2_CGROUP))).toBe('/sys/fs/cgroup/system.slice/fusion.service');
  });

  it('maps paths through a mount whose root is not the hierarchy root (containers)', () => {
    const mount = { mountPoint: '/sys/fs/cgroup/memory', root: '/docker/abc', fsType: 'cgroup' as const, superOptions: ['memory'] };
    expect(cgroupDir(mount, '/docker/abc')).toBe('/sys/fs/cgroup/memory');
    expect(cgroupDir(mount, '/docker/abc/sub')).toBe('/sys/fs/cgroup/memory/sub');
    expect(cgroupDir(mount, '/elsewhere')).toBeNull();
  });

  it('reads key/value control files', () => {
    expect(parseKeyValues('oom_kill_disable 0\nunder_oom 0\noom_kill 2\n').get('oom_kill')).toBe(2);
    expect(parseKeyValues('max 17\n').get('max')).toBe(17);
    expect(parseKeyValues(null).size).toBe(0);
  });
});

describe('descendantPids', () => {
  it('finds children and grandchildren of a live process', async () => {
    const { spawn } = await import('node:child_process');
    const { descendantPids } = await import('../../../src/launcher/proc-files.js');
    const shell = spawn('/bin/sh', ['-c', 'sleep 30 & sleep 30 & echo started; wait'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      await new Promise((resolve) => shell.stdout.once('data', resolve));
      for (const strategy of ['auto', 'scan'] as const) {
        const pids = await descendantPids(shell.pid as number, strategy);
        expect(pids[0]).toBe(shell.pid);
        expect(pids.length).toBe(3);
      }
    } finally {
      for (const pid of await descendantPids(shell.pid as number)) process.kill(pid, 'SIGKILL');
    }
  });
});
