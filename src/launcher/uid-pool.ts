/**
 * One host uid per sandbox, from a dedicated range (docs/security.md#uid-model).
 *
 * A root daemon runs every sandbox (bwrap itself, or the container's processes) as a uid leased
 * here, and hands that sandbox's `/out` and broker socket to it alone (0700/0600). Two live
 * sandboxes never share a uid, so a process of one attempt — or any host process running as
 * another uid of the range — can neither connect to another attempt's broker nor read its `/out`.
 *
 * A uid is "live" while anything of its last holder exists: a process with that uid (real,
 * effective, saved or filesystem), a file the holder was given (its `/out`, broker socket) still
 * owned by it, or its container. Every lease is a claim file created exclusively in a host-wide
 * directory (so concurrent daemons on one host never collide); a released claim stays until the
 * uid is taken again, and is taken over only when none of the above is left and its process is
 * gone — so a restarted daemon checks what the previous one handed out instead of trusting its
 * memory, and a released uid whose `/out` was not collected yet, or whose process survived, is
 * skipped.
 *
 * gid = uid: each sandbox also gets its own group; supplementary groups are always cleared.
 */
import { randomUUID } from 'node:crypto';
import { linkSync, lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FusionError } from '../errors.js';

/** Default range: far above login uids and the subordinate ranges useradd hands out (100000–600100000). */
export const DEFAULT_SANDBOX_UIDS = { start: 2_100_000_000, end: 2_100_065_535 } as const;
/** ids no sandbox may ever get: root, nobody/nogroup, and (uid_t)-1 / -2. */
const FORBIDDEN = new Set([0, 65534, 0xffffffff, 0xfffffffe]);
/** Highest id accepted: signed 32-bit tools (and some file systems) break above it. */
const MAX_ID = 2_147_483_646;

export interface UidRange {
  start: number;
  end: number;
}

/** Parses `START-END` (inclusive), e.g. `2100000000-2100065535`. */
export function parseUidRange(text: string): UidRange {
  const match = /^\s*(\d{1,10})\s*-\s*(\d{1,10})\s*$/.exec(text);
  if (!match) throw new FusionError('invalid_config', `sandbox uid range must be START-END (e.g. ${DEFAULT_SANDBOX_UIDS.start}-${DEFAULT_SANDBOX_UIDS.end}), got ${JSON.stringify(text)}`);
  const range = { start: Number(match[1]), end: Number(match[2]) };
  validateUidRange(range);
  return range;
}

export function validateUidRange(range: UidRange): void {
  const { start, end } = range;
  if (!Number.isInteger(start) || !Number.isInteger(end) || start < 1000 || end > MAX_ID || end < start) {
    throw new FusionError('invalid_config', `sandbox uid range ${start}-${end} must lie within 1000-${MAX_ID}, START <= END`);
  }
  if (end - start < 15) throw new FusionError('invalid_config', `sandbox uid range ${start}-${end} is too small: give at least 16 ids (every concurrent sandbox needs its own)`);
  if (start <= 65534 && end >= 65534) throw new FusionError('invalid_config', `sandbox uid range ${start}-${end} includes 65534 (nobody), which other services share`);
}

/**
 * Ids of the range that /etc/passwd or /etc/group already use (they belong to someone), and
 * other users' subordinate ranges (/etc/subuid, /etc/subgid) that overlap it. Empty when clean.
 */
export function uidRangeConflicts(range: UidRange, files = { passwd: '/etc/passwd', group: '/etc/group', subuid: '/etc/subuid', subgid: '/etc/subgid' }, owner = 'root'): string[] {
  const conflicts: string[] = [];
  const read = (path: string): string => {
    try {
      return readFileSync(path, 'utf8');
    } catch {
      return '';
    }
  };
  for (const [kind, path] of [['user', files.passwd], ['group', files.group]] as const) {
    for (const line of read(path).split('\n')) {
      const [name, , id] = line.split(':');
      const n = Number(id);
      if (name && Number.isInteger(n) && n >= range.start && n <= range.end) conflicts.push(`${kind} ${name} has id ${n} (${path})`);
    }
  }
  for (const path of [files.subuid, files.subgid]) {
    for (const line of read(path).split('\n')) {
      const [name, first, count] = line.split(':');
      const a = Number(first);
      const b = a + Number(count) - 1;
      if (!name || name === owner || !Number.isInteger(a) || !Number.isInteger(b)) continue;
      if (a <= range.end && b >= range.start) conflicts.push(`subordinate ids ${a}-${b} of ${name} overlap (${path})`);
    }
  }
  return conflicts;
}

/** Every uid and gid (real, effective, saved, filesystem) of every process on the host. */
export function liveProcessIds(procDir = '/proc'): Set<number> {
  const ids = new Set<number>();
  let entries: string[];
  try {
    entries = readdirSync(procDir);
  } catch {
    return ids;
  }
  for (const pid of entries) {
    if (!/^\d+$/.test(pid)) continue;
    let status: string;
    try {
      status = readFileSync(`${procDir}/${pid}/status`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // A zombie holds its ids in name only: it cannot run, open a file or be signalled, and the
    // reaper skips it too; counting it would keep a dead daemon's claim standing until the host's
    // init (which on some hosts reaps only every few seconds, on others never) collects it.
    if (/^State:\s+Z/m.test(status)) continue;
    for (const match of status.matchAll(/^(?:Uid|Gid):\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/gm)) {
      for (let i = 1; i <= 4; i++) ids.add(Number(match[i]));
    }
  }
  return ids;
}

/** What a holder was given: checked again before its uid is handed out once more. */
export interface UidHolder {
  /** For logs and the state file: `taskId/label`. */
  label: string;
  /** Host paths given to the uid (its /out, its broker socket): live while they exist and are owned by it. */
  paths: string[];
  /** The container that ran as the uid (Docker, gVisor): live while the engine still has it. */
  container?: string;
}

export interface UidLease {
  readonly uid: number;
  readonly gid: number;
  /** Records more of what the holder owns (e.g. the container name once it is known). */
  update(extra: Partial<Omit<UidHolder, 'label'>>): void;
  /** The sandbox is gone; the uid becomes reusable once nothing of it is left (checked at the next lease). */
  release(): void;
}

export interface UidPoolOptions {
  range?: UidRange;
  /**
   * Host-wide claim directory, shared by every daemon on the host (default
   * /run/fusion-sandbox-uids, root 0700): one file per uid, created exclusively, so two daemons
   * (or test processes) can never lease the same uid. It outlives the daemon and is the persisted
   * state a restarted daemon checks; /run is cleared at boot, when every sandbox is gone too.
   */
  claimDir?: string;
  /** Whether the engine still has a container (Docker, gVisor); absent: a crashed holder's container is not checked. */
  containerExists?: (name: string) => Promise<boolean>;
  /** Injected for tests. */
  liveIds?: () => Set<number>;
}

/** What `sweep` found in the claim directory. */
export interface ClaimSweep {
  /** Claims removed: their holder is gone and nothing of it is left. */
  released: number[];
  /** Uids whose claim still stands (a live holder, or something of a dead one is left). */
  standing: number[];
  /** Uids claimed by a live process that has not released them: their processes are a live sandbox's. */
  held: number[];
}

export interface UidPool {
  readonly range: UidRange;
  /** The claim directory this pool leases in (shared by every daemon on the host). */
  readonly claimDir: string;
  lease(holder: UidHolder): Promise<UidLease>;
  /**
   * Removes every claim that no longer stands (its holder released it or died, and no process,
   * file or container of it is left): what a SIGKILLed daemon left. Claims of live holders stay.
   */
  sweep(): Promise<ClaimSweep>;
  /** uids this process leased and has not released (for tests and metrics). */
  leased(): number[];
}

interface Claim extends UidHolder {
  /** Unique per claim: a takeover checks it is removing exactly the claim it judged stale. */
  nonce: string;
  /** The claiming process (pid and start time, so a reused pid is not mistaken for it). */
  pid: number;
  started: string;
  /** False once released: the uid is then free when nothing of it is left. */
  active: boolean;
}

export const DEFAULT_CLAIM_DIR = '/run/fusion-sandbox-uids';

/** Whether `path` still exists and belongs to `uid` (a leftover of that holder). */
function ownedBy(path: string, uid: number): boolean {
  try {
    return lstatSync(path).uid === uid;
  } catch {
    return false;
  }
}

/** A process's start time (field 22 of /proc/PID/stat), or null when it is gone. */
export function startTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

/**
 * Whether the process that made `uid`'s claim still lives, whether or not it released the claim:
 * a live daemon's sandboxes, even those it is still tearing down after the release, are its own to
 * end, never another daemon's (a torn or foreign claim counts as alive).
 */
export function claimHolderAlive(claimDir: string, uid: number): boolean {
  const text = readText(join(claimDir, String(uid)));
  if (text === null) return false;
  try {
    const claim = JSON.parse(text) as Claim;
    return startTime(claim.pid) === claim.started;
  } catch {
    return true;
  }
}

/** Whether `uid` is claimed right now by a live holder that has not released it. */
export function claimHeld(claimDir: string, uid: number): boolean {
  const text = readText(join(claimDir, String(uid)));
  if (text === null) return false;
  try {
    const claim = JSON.parse(text) as Claim;
    return claim.active && startTime(claim.pid) === claim.started;
  } catch {
    return true; // torn or foreign: treated as standing
  }
}

export function createUidPool(options: UidPoolOptions = {}): UidPool {
  const range = options.range ?? { ...DEFAULT_SANDBOX_UIDS };
  validateUidRange(range);
  const size = range.end - range.start + 1;
  const liveIds = options.liveIds ?? (() => liveProcessIds());
  const claimDir = options.claimDir ?? DEFAULT_CLAIM_DIR;
  const self = { pid: process.pid, started: startTime(process.pid) ?? '' };
  const mine = new Set<number>();
  let ready = false;
  const ensureDir = (): void => {
    if (ready) return;
    mkdirSync(claimDir, { recursive: true, mode: 0o700 });
    const info = lstatSync(claimDir);
    if (!info.isDirectory() || info.uid !== (process.getuid?.() ?? 0) || (info.mode & 0o022) !== 0) {
      throw new FusionError('invalid_config', `sandbox uid claim directory ${claimDir} must be a directory owned by this daemon's uid and not group/world writable`);
    }
    ready = true;
  };

  const isHeld = (claim: Claim): boolean => claim.active && startTime(claim.pid) === claim.started;
  /** Whether a claim still stands: its holder is active in a live process, or something of it is left. */
  async function stands(uid: number, claim: Claim, live?: Set<number>): Promise<boolean> {
    if (isHeld(claim)) return true;
    if (live?.has(uid)) return true;
    if (claim.paths.some((path) => ownedBy(path, uid))) return true;
    if (claim.container !== undefined && options.containerExists !== undefined) {
      return options.containerExists(claim.container).catch(() => true);
    }
    return false;
  }

  /** Removes a stale claim if it is still exactly `text`; false when someone else got there first. */
  function takeOver(path: string, text: string, nonce: string): boolean {
    const aside = `${path}.${nonce}`;
    try {
      renameSync(path, aside);
    } catch {
      return false;
    }
    if (readText(aside) !== text) {
      // Another process replaced it between our read and rename: put its claim back.
      try {
        linkSync(aside, path);
      } catch {
        // a third claim exists already; theirs stands
      }
      rmSync(aside, { force: true });
      return false;
    }
    rmSync(aside, { force: true });
    return true;
  }

  function claimFor(uid: number, holder: UidHolder): UidLease | null {
    const path = join(claimDir, String(uid));
    const claim: Claim = {
      label: holder.label, paths: [...holder.paths], ...(holder.container === undefined ? {} : { container: holder.container }),
      nonce: randomUUID(), pid: self.pid, started: self.started, active: true,
    };
    try {
      writeFileSync(path, JSON.stringify(claim), { flag: 'wx', mode: 0o600 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return null;
      throw err;
    }
    mine.add(uid);
    // Rewrites our own claim (never another's): write aside, then rename over it.
    const rewrite = (): void => {
      const tmp = `${path}.${claim.nonce}.new`;
      writeFileSync(tmp, JSON.stringify(claim), { mode: 0o600 });
      renameSync(tmp, path);
    };
    let released = false;
    return {
      uid,
      gid: uid,
      update(extra) {
        if (released) return;
        if (extra.paths) claim.paths.push(...extra.paths);
        if (extra.container !== undefined) claim.container = extra.container;
        rewrite();
      },
      release() {
        if (released) return;
        released = true;
        mine.delete(uid);
        claim.active = false;
        rewrite();
      },
    };
  }

  // One lease at a time in this process (other processes are kept apart by the exclusive create).
  let queue: Promise<unknown> = Promise.resolve();
  let cursor = Math.floor(Math.random() * size);
  async function pick(holder: UidHolder): Promise<UidLease> {
    ensureDir();
    const live = liveIds();
    for (let step = 0; step < size; step++) {
      const uid = range.start + ((cursor + step) % size);
      if (FORBIDDEN.has(uid) || live.has(uid)) continue;
      let lease = claimFor(uid, holder);
      if (lease === null) {
        const path = join(claimDir, String(uid));
        const text = readText(path);
        let claim: Claim | null;
        try {
          claim = text === null ? null : (JSON.parse(text) as Claim);
        } catch {
          claim = null; // torn or foreign: treated as standing, never taken over
        }
        if (text === null || claim === null || (await stands(uid, claim))) continue;
        if (!takeOver(path, text, randomUUID())) continue;
        lease = claimFor(uid, holder);
        if (lease === null) continue;
      }
      cursor = (cursor + step + 1) % size;
      return lease;
    }
    throw new FusionError('launch_failed', `no free sandbox uid in ${range.start}-${range.end}: every id is leased or still has processes or files; widen --sandbox-uids`, { retryable: true });
  }

  async function sweepClaims(): Promise<ClaimSweep> {
    const found: ClaimSweep = { released: [], standing: [], held: [] };
    let names: string[];
    try {
      names = readdirSync(claimDir);
    } catch {
      return found; // no claim was ever made on this host since boot
    }
    const live = liveIds();
    for (const name of names) {
      if (!/^\d+$/.test(name)) continue;
      const uid = Number(name);
      const path = join(claimDir, name);
      const text = readText(path);
      let claim: Claim | null;
      try {
        claim = text === null ? null : (JSON.parse(text) as Claim);
      } catch {
        claim = null;
      }
      if (text === null || claim === null) continue; // gone meanwhile, or torn: never taken over
      if (isHeld(claim)) found.held.push(uid);
      if (await stands(uid, claim, live)) {
        found.standing.push(uid);
        continue;
      }
      if (takeOver(path, text, randomUUID())) found.released.push(uid);
    }
    return found;
  }

  return {
    range,
    claimDir,
    lease(holder) {
      const next = queue.then(() => pick(holder));
      queue = next.catch(() => undefined);
      return next;
    },
    sweep() {
      const next = queue.then(() => sweepClaims());
      queue = next.catch(() => undefined);
      return next;
    },
    leased: () => [...mine],
  };
}

let processPool: UidPool | undefined;

/**
 * The pool of a launcher built without one (tests, `fusion sandbox exec`): the default range and
 * claim directory. The daemon builds its own from its configuration (src/main.ts).
 */
export function defaultUidPool(): UidPool {
  return (processPool ??= createUidPool());
}
