/**
 * Reading the kernel's process tables: the cgroup mounts and memberships in /proc/self/mountinfo
 * and /proc/self/cgroup, `key value` counter files, and the process tree under a pid. Pure
 * parsers plus small /proc readers; nothing here creates or changes anything.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface CgroupMount {
  mountPoint: string;
  /** The hierarchy path this mount shows at its mount point (not `/` inside some containers). */
  root: string;
  fsType: 'cgroup' | 'cgroup2';
  superOptions: string[];
}

export interface ProcCgroupEntry {
  hierarchyId: string;
  controllers: string[];
  path: string;
}

/** The file's text, or null when it cannot be read (absent, gone, not permitted). */
export async function readText(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return null;
  }
}

/** Undoes the octal escapes of /proc/self/mountinfo (`\040` for a space…). */
function unescapeMountPath(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** The cgroup (v1 and v2) mounts listed in /proc/self/mountinfo. */
export function parseCgroupMounts(mountinfo: string): CgroupMount[] {
  const mounts: CgroupMount[] = [];
  for (const line of mountinfo.split('\n')) {
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const left = line.slice(0, sep).split(' ');
    const right = line.slice(sep + 3).split(' ');
    const fsType = right[0];
    if (fsType !== 'cgroup' && fsType !== 'cgroup2') continue;
    const root = left[3];
    const mountPoint = left[4];
    if (root === undefined || mountPoint === undefined) continue;
    mounts.push({
      mountPoint: unescapeMountPath(mountPoint),
      root: unescapeMountPath(root),
      fsType,
      superOptions: (right[2] ?? '').split(','),
    });
  }
  return mounts;
}

/** The lines of /proc/self/cgroup: `id:controllers:path`. */
export function parseProcCgroup(text: string): ProcCgroupEntry[] {
  const entries: ProcCgroupEntry[] = [];
  for (const line of text.split('\n')) {
    const first = line.indexOf(':');
    const second = line.indexOf(':', first + 1);
    if (first < 0 || second < 0) continue;
    entries.push({
      hierarchyId: line.slice(0, first),
      controllers: line.slice(first + 1, second).split(',').filter((c) => c !== ''),
      path: line.slice(second + 1),
    });
  }
  return entries;
}

/** Host directory of our own cgroup in one mount, or null when the mount does not show it. */
export function cgroupDir(mount: CgroupMount, ownPath: string): string | null {
  let relative: string;
  if (mount.root === '/') relative = ownPath;
  else if (ownPath === mount.root) relative = '/';
  else if (ownPath.startsWith(`${mount.root}/`)) relative = ownPath.slice(mount.root.length);
  else return null;
  const dir = join(mount.mountPoint, relative);
  return dir.length > 1 && dir.endsWith('/') ? dir.slice(0, -1) : dir;
}

/** Directory of the daemon's own cgroup for a v1 controller (`memory`, `pids`). */
export function v1ControllerDir(mounts: CgroupMount[], entries: ProcCgroupEntry[], controller: string): string | null {
  const entry = entries.find((e) => e.hierarchyId !== '0' && e.controllers.includes(controller));
  const mount = mounts.find((m) => m.fsType === 'cgroup' && m.superOptions.includes(controller));
  if (entry === undefined || mount === undefined) return null;
  return cgroupDir(mount, entry.path);
}

/** Directory of the daemon's own cgroup in the v2 hierarchy. */
export function v2Dir(mounts: CgroupMount[], entries: ProcCgroupEntry[]): string | null {
  const entry = entries.find((e) => e.hierarchyId === '0');
  const mount = mounts.find((m) => m.fsType === 'cgroup2');
  if (entry === undefined || mount === undefined) return null;
  return cgroupDir(mount, entry.path);
}

/** `key value` lines (memory.events, pids.events, memory.oom_control) as a map. */
export function parseKeyValues(text: string | null): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of (text ?? '').split('\n')) {
    const [key, value] = line.trim().split(/\s+/);
    if (key !== undefined && value !== undefined && /^\d+$/.test(value)) out.set(key, Number(value));
  }
  return out;
}

/** The pids listed one per line (`cgroup.procs`). */
export function parsePids(text: string | null): number[] {
  return (text ?? '').split('\n').filter((l) => /^\d+$/.test(l)).map(Number);
}

/** Number of tasks (threads included, as RLIMIT_NPROC counts them) whose real uid is `uid`. */
export async function countTasksOfUid(uid: number): Promise<number> {
  let total = 0;
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const status = await readText(`/proc/${name}/status`);
    if (status === null) continue;
    const realUid = /^Uid:\s+(\d+)/m.exec(status)?.[1];
    const threads = /^Threads:\s+(\d+)/m.exec(status)?.[1];
    if (realUid !== undefined && Number(realUid) === uid) total += Number(threads ?? 1);
  }
  return total;
}

/** Parent pid of every process, from /proc/PID/stat (fallback when /proc/…/children is absent). */
async function parentMap(): Promise<Map<number, number[]>> {
  const children = new Map<number, number[]>();
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await readText(`/proc/${name}/stat`);
    if (stat === null) continue;
    // "pid (comm) state ppid …": comm may contain spaces and parentheses, so cut at the last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const list = children.get(ppid) ?? [];
    list.push(Number(name));
    children.set(ppid, list);
  }
  return children;
}

/** Host pids of `rootPid` and all its descendants. */
export async function descendantPids(rootPid: number, strategy: 'auto' | 'scan' = 'auto'): Promise<number[]> {
  // /proc/PID/task/TID/children needs CONFIG_PROC_CHILDREN; without it, scan every process.
  const hasChildrenFiles = strategy === 'auto' && (await readText(`/proc/${rootPid}/task/${rootPid}/children`)) !== null;
  const byParent = hasChildrenFiles ? null : await parentMap();
  const seen = new Set<number>();
  const queue = [rootPid];
  while (queue.length > 0) {
    const pid = queue.shift() as number;
    if (seen.has(pid)) continue;
    seen.add(pid);
    if (byParent !== null) {
      queue.push(...(byParent.get(pid) ?? []));
      continue;
    }
    let tids: string[];
    try {
      tids = await readdir(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) {
      const children = await readText(`/proc/${pid}/task/${tid}/children`);
      for (const child of (children ?? '').trim().split(/\s+/)) {
        if (/^\d+$/.test(child)) queue.push(Number(child));
      }
    }
  }
  return [...seen];
}
