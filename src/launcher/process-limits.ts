/**
 * Memory and process-count caps for bwrap sandboxes (bwrap itself has none).
 *
 * Three mechanisms, tried in this order; the one in use is named in every launch log line:
 *
 * - `cgroup-v2`: a child cgroup with `memory.max`, `memory.swap.max=0`, `pids.max`. Needs a
 *   cgroup2 hierarchy whose base cgroup (the daemon's own, or `cgroupParent`) has the memory and
 *   pids controllers and can enable them for children. On a systemd host this means a delegated
 *   cgroup (`Delegate=yes`) given as `cgroupParent`, because the daemon's own cgroup holds
 *   processes and the kernel refuses to enable controllers there.
 * - `cgroup-v1`: a child cgroup in the v1 `memory` and `pids` hierarchies (hybrid hosts, many
 *   containers and VMs). `memory.limit_in_bytes` (+ memsw when swap is accounted) and `pids.max`.
 * - `rlimit`: `prlimit --data --nproc` on bwrap. RLIMIT_DATA (private writable memory) is used
 *   instead of RLIMIT_AS because V8 reserves large address ranges it never touches and aborts at
 *   start under a tight RLIMIT_AS. RLIMIT_NPROC counts every task of the *host uid*, so the cap is
 *   set to (tasks the uid already has + maxProcesses): concurrent sandboxes sharing the uid
 *   share that headroom. Used when cgroups are not writable (non-root daemons, locked hosts).
 *
 * Cgroups are entered race-free: bwrap holds its sandbox init on `--block-fd` until the init's
 * host pid (from `--info-fd`) has been written to `cgroup.procs`, so every later process in the
 * sandbox starts inside the cgroup. The outer bwrap monitor stays outside, so the OOM killer only
 * ever picks a sandbox process.
 */
import { constants as fsConstants } from 'node:fs';
import { access, mkdir, readdir, readFile, rmdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export type LimitMechanism = 'cgroup-v2' | 'cgroup-v1' | 'rlimit';
/** `auto` picks the first working mechanism; `cgroup` fails when none works; `rlimit` forces the fallback. */
export type LimitPreference = 'auto' | 'cgroup' | 'rlimit';

export interface ProcessCaps {
  memoryBytes: number;
  maxProcesses: number;
}

export interface CgroupStats {
  /** Processes the kernel OOM killer killed in this cgroup. */
  oomKills: number;
  /** Times a fork/clone was refused by `pids.max`. */
  pidsLimitHits: number;
  memoryPeakBytes: number | null;
}

export interface SandboxCgroup {
  readonly dirs: readonly string[];
  /** Moves a (host) pid into the cgroup. */
  addProcess(pid: number): Promise<void>;
  /** Host pids currently in the cgroup. */
  pids(): Promise<number[]>;
  stats(): Promise<CgroupStats>;
  /** Kills what is left and removes the cgroup directories. */
  destroy(): Promise<void>;
}

export type LimitBackend =
  | { mechanism: 'cgroup-v1' | 'cgroup-v2'; detail: string; create(name: string, caps: ProcessCaps): Promise<SandboxCgroup> }
  | { mechanism: 'rlimit'; detail: string; commandPrefix(caps: ProcessCaps, uid: number): Promise<string[]> };

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

const SWEEP_AGE_MS = 60_000;
const GROUP_DIR = 'fusion-sandboxes';

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

function errnoOf(err: unknown): string {
  return (err as NodeJS.ErrnoException | null)?.code ?? 'unknown';
}

async function readText(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return null;
  }
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

function parsePids(text: string | null): number[] {
  return (text ?? '').split('\n').filter((l) => /^\d+$/.test(l)).map(Number);
}

async function killAll(pids: number[]): Promise<void> {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/** rmdir with retries: a cgroup stays busy until the kernel has reaped its last task. */
async function removeCgroupDir(dir: string, listPids: () => Promise<number[]>): Promise<void> {
  // The last tasks are usually gone within a few ms of bwrap's exit: back off from 1 ms to 50 ms
  // (about 5 s in all) instead of sleeping a fixed slice on every exit.
  for (let attempt = 0, delayMs = 1; attempt < 110; attempt += 1, delayMs = Math.min(delayMs * 2, 50)) {
    try {
      await rmdir(dir);
      return;
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return;
      if (errnoOf(err) !== 'EBUSY') throw err;
    }
    await killAll(await listPids());
    await new Promise((resolve) => setTimeout(resolve, delayMs));
  }
  throw new Error(`cgroup ${dir} is still busy`);
}

/** Removes empty per-sandbox cgroups older than a minute that a crashed daemon left behind. */
async function sweepStale(groupDir: string): Promise<void> {
  let names: string[];
  try {
    names = await readdir(groupDir);
  } catch {
    return;
  }
  const now = Date.now();
  for (const name of names) {
    const dir = join(groupDir, name);
    try {
      const info = await stat(dir);
      if (info.isDirectory() && now - info.mtimeMs > SWEEP_AGE_MS) await rmdir(dir);
    } catch {
      // busy (still running) or not ours: leave it
    }
  }
}

/**
 * The `fusion-sandboxes` directories holding the per-sandbox cgroups. They exist only while a
 * sandbox does: the last one out removes them, so the daemon leaves nothing in a parent cgroup
 * that its owner (systemd, a container runtime) may want to remove.
 */
class GroupDirs {
  private lastSweepMs = 0;

  constructor(readonly dirs: readonly string[], private readonly enableControllers: boolean) {}

  private async ensure(): Promise<void> {
    for (const dir of this.dirs) {
      await mkdir(dir, { recursive: true });
      if (this.enableControllers) await writeFile(join(dir, 'cgroup.subtree_control'), '+memory +pids');
    }
  }

  /** Proves that cgroups can be created here (an existing directory proves nothing). */
  async probe(): Promise<void> {
    await this.ensure();
    for (const dir of this.dirs) {
      const probe = join(dir, `probe-${process.pid}-${Date.now()}`);
      await mkdir(probe);
      await rmdir(probe);
    }
    await this.sweep();
  }

  /** Removes leftovers of crashed daemons at most once a minute, then the group if empty. */
  async sweep(): Promise<void> {
    if (Date.now() - this.lastSweepMs < SWEEP_AGE_MS) return;
    this.lastSweepMs = Date.now();
    for (const dir of this.dirs) await sweepStale(dir);
    await this.releaseIfEmpty();
  }

  async releaseIfEmpty(): Promise<void> {
    for (const dir of this.dirs) await rmdir(dir).catch(() => undefined); // EBUSY while in use
  }

  /** Runs `make` with the group present; retries when a concurrent release removed it. */
  async create<T>(make: () => Promise<T>): Promise<T> {
    await this.sweep();
    for (let attempt = 0; ; attempt += 1) {
      await this.ensure();
      try {
        return await make();
      } catch (err) {
        if (errnoOf(err) !== 'ENOENT' || attempt >= 3) throw err;
      }
    }
  }
}

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

async function tryV2(mounts: CgroupMount[], entries: ProcCgroupEntry[], cgroupParent: string | undefined): Promise<LimitBackend | string> {
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

async function tryV1(mounts: CgroupMount[], entries: ProcCgroupEntry[]): Promise<LimitBackend | string> {
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

function rlimitBackend(prlimitPath: string, why: string): LimitBackend {
  return {
    mechanism: 'rlimit',
    detail: `${prlimitPath} (RLIMIT_DATA, RLIMIT_NPROC); cgroups not used: ${why}`,
    async commandPrefix(caps, uid) {
      const nproc = (await countTasksOfUid(uid)) + caps.maxProcesses;
      return [prlimitPath, `--data=${caps.memoryBytes}`, `--nproc=${nproc}`, '--'];
    },
  };
}

export interface DetectOptions {
  preference?: LimitPreference;
  /** A delegated cgroup2 directory to create sandbox cgroups under. */
  cgroupParent?: string;
  prlimitPath?: string;
}

/** Finds the best working cap mechanism; throws (with every reason) when none works. */
export async function detectLimitBackend(options: DetectOptions = {}): Promise<LimitBackend> {
  const preference = options.preference ?? 'auto';
  const prlimitPath = options.prlimitPath ?? '/usr/bin/prlimit';
  const reasons: string[] = [];
  if (preference !== 'rlimit') {
    const mounts = parseCgroupMounts((await readText('/proc/self/mountinfo')) ?? '');
    const entries = parseProcCgroup((await readText('/proc/self/cgroup')) ?? '');
    for (const attempt of [() => tryV2(mounts, entries, options.cgroupParent), () => tryV1(mounts, entries)]) {
      const result = await attempt();
      if (typeof result !== 'string') return result;
      reasons.push(result);
    }
    if (preference === 'cgroup') throw new Error(`no usable cgroup: ${reasons.join('; ')}`);
  } else {
    reasons.push('rlimit forced by configuration');
  }
  try {
    await access(prlimitPath, fsConstants.X_OK);
  } catch {
    reasons.push(`${prlimitPath} is missing (apt-get install util-linux)`);
    throw new Error(`no memory/process cap mechanism: ${reasons.join('; ')}`);
  }
  return rlimitBackend(prlimitPath, reasons.join('; '));
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
