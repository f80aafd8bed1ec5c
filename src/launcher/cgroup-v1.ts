/**
 * Sandbox cgroups in the v1 `memory` and `pids` hierarchies (hybrid hosts, many containers and
 * VMs): `memory.limit_in_bytes` (+ memsw when swap is accounted) and `pids.max`.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoOf, GROUP_DIR, GroupDirs, killAll, removeCgroupDir, type CgroupStats, type ProcessCaps, type SandboxCgroup } from './cgroup-groups.js';
import { parseKeyValues, parsePids, readText, v1ControllerDir, type CgroupMount, type ProcCgroupEntry } from './proc-files.js';
import type { CgroupLimitBackend } from './process-limits.js';

class V1Cgroup implements SandboxCgroup {
  constructor(private readonly memoryDir: string, private readonly pidsDir: string, private readonly group: GroupDirs) {}

  get dirs(): readonly string[] {
    return [this.memoryDir, this.pidsDir];
  }

  static async create(groups: GroupDirs, name: string, caps: ProcessCaps): Promise<V1Cgroup> {
    const [memoryBase, pidsBase] = groups.dirs as [string, string];
    const cgroup = new V1Cgroup(join(memoryBase, name), join(pidsBase, name), groups);
    await mkdir(cgroup.memoryDir);
    try {
      await mkdir(cgroup.pidsDir);
      await writeFile(join(cgroup.memoryDir, 'memory.limit_in_bytes'), String(caps.memoryBytes));
      // Without this, a cgroup over its limit would swap instead of being killed (when swap exists).
      await writeFile(join(cgroup.memoryDir, 'memory.memsw.limit_in_bytes'), String(caps.memoryBytes)).catch(() => undefined);
      await writeFile(join(cgroup.pidsDir, 'pids.max'), String(caps.maxProcesses));
    } catch (err) {
      await cgroup.destroy().catch(() => undefined);
      throw err;
    }
    return cgroup;
  }

  async addProcess(pid: number): Promise<void> {
    await writeFile(join(this.memoryDir, 'cgroup.procs'), String(pid));
    await writeFile(join(this.pidsDir, 'cgroup.procs'), String(pid));
  }

  async pids(): Promise<number[]> {
    const all = new Set([
      ...parsePids(await readText(join(this.pidsDir, 'cgroup.procs'))),
      ...parsePids(await readText(join(this.memoryDir, 'cgroup.procs'))),
    ]);
    return [...all];
  }

  async stats(): Promise<CgroupStats> {
    const oom = parseKeyValues(await readText(join(this.memoryDir, 'memory.oom_control')));
    const events = parseKeyValues(await readText(join(this.pidsDir, 'pids.events')));
    const peak = await readText(join(this.memoryDir, 'memory.max_usage_in_bytes'));
    return {
      oomKills: oom.get('oom_kill') ?? 0,
      pidsLimitHits: events.get('max') ?? 0,
      memoryPeakBytes: peak === null ? null : Number(peak.trim()),
    };
  }

  async destroy(): Promise<void> {
    const list = (): Promise<number[]> => this.pids();
    await killAll(await list());
    await removeCgroupDir(this.memoryDir, list);
    await removeCgroupDir(this.pidsDir, list);
    await this.group.releaseIfEmpty();
  }
}

/** The v1 backend, or why it cannot be used. */
export async function tryCgroupV1(mounts: CgroupMount[], entries: ProcCgroupEntry[]): Promise<CgroupLimitBackend | string> {
  const memoryBase = v1ControllerDir(mounts, entries, 'memory');
  const pidsBase = v1ControllerDir(mounts, entries, 'pids');
  if (memoryBase === null || pidsBase === null) return 'no cgroup v1 memory+pids hierarchies';
  try {
    const groups = new GroupDirs([join(memoryBase, GROUP_DIR), join(pidsBase, GROUP_DIR)], false);
    await groups.probe();
    return {
      mechanism: 'cgroup-v1',
      detail: groups.dirs.join(' + '),
      create: (name, caps) => groups.create(() => V1Cgroup.create(groups, name, caps)),
    };
  } catch (err) {
    return `cgroup v1 ${memoryBase} is not writable (${errnoOf(err)})`;
  }
}
