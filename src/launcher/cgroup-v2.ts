/**
 * Sandbox cgroups in the unified (v2) hierarchy: `memory.max`, `memory.swap.max=0`, `pids.max`.
 * Needs a base cgroup (the daemon's own, or `cgroupParent`) with the memory and pids controllers
 * that can enable them for children. On a systemd host this means a delegated cgroup
 * (`Delegate=yes`) given as `cgroupParent`, because the daemon's own cgroup holds processes and
 * the kernel refuses to enable controllers there.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoOf, GROUP_DIR, GroupDirs, removeCgroupDir, type CgroupStats, type ProcessCaps, type SandboxCgroup } from './cgroup-groups.js';
import { parseKeyValues, parsePids, readText, v2Dir, type CgroupMount, type ProcCgroupEntry } from './proc-files.js';
import type { CgroupLimitBackend } from './process-limits.js';

class V2Cgroup implements SandboxCgroup {
  constructor(private readonly dir: string, private readonly group: GroupDirs) {}

  get dirs(): readonly string[] {
    return [this.dir];
  }

  static async create(groups: GroupDirs, name: string, caps: ProcessCaps): Promise<V2Cgroup> {
    const cgroup = new V2Cgroup(join(groups.dirs[0] as string, name), groups);
    await mkdir(cgroup.dir);
    try {
      await writeFile(join(cgroup.dir, 'memory.max'), String(caps.memoryBytes));
      await writeFile(join(cgroup.dir, 'memory.swap.max'), '0').catch(() => undefined);
      await writeFile(join(cgroup.dir, 'pids.max'), String(caps.maxProcesses));
    } catch (err) {
      await cgroup.destroy().catch(() => undefined);
      throw err;
    }
    return cgroup;
  }

  async addProcess(pid: number): Promise<void> {
    await writeFile(join(this.dir, 'cgroup.procs'), String(pid));
  }

  async pids(): Promise<number[]> {
    return parsePids(await readText(join(this.dir, 'cgroup.procs')));
  }

  async stats(): Promise<CgroupStats> {
    const memory = parseKeyValues(await readText(join(this.dir, 'memory.events')));
    const pids = parseKeyValues(await readText(join(this.dir, 'pids.events')));
    const peak = await readText(join(this.dir, 'memory.peak'));
    return {
      oomKills: memory.get('oom_kill') ?? 0,
      pidsLimitHits: pids.get('max') ?? 0,
      memoryPeakBytes: peak === null ? null : Number(peak.trim()),
    };
  }

  async destroy(): Promise<void> {
    await writeFile(join(this.dir, 'cgroup.kill'), '1').catch(() => undefined);
    await removeCgroupDir(this.dir, () => this.pids());
    await this.group.releaseIfEmpty();
  }
}

/** The v2 backend, or why it cannot be used. */
export async function tryCgroupV2(mounts: CgroupMount[], entries: ProcCgroupEntry[], cgroupParent: string | undefined): Promise<CgroupLimitBackend | string> {
  const base = cgroupParent ?? v2Dir(mounts, entries);
  if (base === null) return 'no cgroup2 hierarchy';
  const controllers = (await readText(join(base, 'cgroup.controllers')))?.trim().split(/\s+/) ?? [];
  if (!controllers.includes('memory') || !controllers.includes('pids')) {
    return `cgroup2 ${base} lacks the memory/pids controllers (has: ${controllers.join(' ') || 'none'})`;
  }
  try {
    const subtree = (await readText(join(base, 'cgroup.subtree_control')))?.trim().split(/\s+/) ?? [];
    if (!subtree.includes('memory') || !subtree.includes('pids')) {
      // Refused (EBUSY) when `base` holds processes: the "no internal processes" rule.
      await writeFile(join(base, 'cgroup.subtree_control'), '+memory +pids');
    }
    const groups = new GroupDirs([join(base, GROUP_DIR)], true);
    await groups.probe();
    return {
      mechanism: 'cgroup-v2',
      detail: groups.dirs.join(' + '),
      create: (name, caps) => groups.create(() => V2Cgroup.create(groups, name, caps)),
    };
  } catch (err) {
    return `cgroup2 ${base} is not usable (${errnoOf(err)}; a delegated cgroup can be given as cgroupParent)`;
  }
}
