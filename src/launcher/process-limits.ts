/**
 * Memory and process-count caps for bwrap sandboxes (bwrap itself has none): which mechanism a
 * host offers, detected once per launcher and named in every launch log line.
 *
 * - `cgroup-v2` (`cgroup-v2.ts`), else `cgroup-v1` (`cgroup-v1.ts`): real caps, OOM accounting.
 * - `rlimit` (`rlimit.ts`): the weak fallback. Never chosen silently: `auto` refuses a host
 *   without a usable cgroup unless the admin opted into the rlimit mode (`limits: 'rlimit'`, or
 *   `allowRlimitFallback` / FUSION_SANDBOX_RLIMIT=1), and the refusal says what would be lost.
 *
 * Cgroups are entered race-free: bwrap holds its sandbox init on `--block-fd` until the init's
 * host pid (from `--info-fd`) has been written to `cgroup.procs`, so every later process in the
 * sandbox starts inside the cgroup. The outer bwrap monitor stays outside, so the OOM killer only
 * ever picks a sandbox process.
 */
import { constants as fsConstants } from 'node:fs';
import { access } from 'node:fs/promises';
import type { ProcessCaps, SandboxCgroup } from './cgroup-groups.js';
import { tryCgroupV1 } from './cgroup-v1.js';
import { tryCgroupV2 } from './cgroup-v2.js';
import { parseCgroupMounts, parseProcCgroup, readText } from './proc-files.js';
import { rlimitBackend } from './rlimit.js';

export type { CgroupStats, ProcessCaps, SandboxCgroup } from './cgroup-groups.js';

export type LimitMechanism = 'cgroup-v2' | 'cgroup-v1' | 'rlimit';
/**
 * `auto` picks a working cgroup mechanism (the rlimit mode only when `allowRlimitFallback`);
 * `cgroup` fails when none works; `rlimit` is the admin's explicit choice of the weak mode.
 */
export type LimitPreference = 'auto' | 'cgroup' | 'rlimit';

export interface CgroupLimitBackend {
  mechanism: 'cgroup-v1' | 'cgroup-v2';
  detail: string;
  create(name: string, caps: ProcessCaps): Promise<SandboxCgroup>;
}

export interface RlimitLimitBackend {
  mechanism: 'rlimit';
  detail: string;
  commandPrefix(caps: ProcessCaps, uid: number): Promise<string[]>;
}

export type LimitBackend = CgroupLimitBackend | RlimitLimitBackend;

/** The environment switch an admin sets to accept the rlimit mode when no cgroup is usable. */
export const RLIMIT_OPT_IN_ENV = 'FUSION_SANDBOX_RLIMIT';

export interface DetectOptions {
  preference?: LimitPreference;
  /** A delegated cgroup2 directory to create sandbox cgroups under. */
  cgroupParent?: string;
  prlimitPath?: string;
  /** With `auto`: fall back to the rlimit mode when no cgroup is usable (the admin's opt-in). */
  allowRlimitFallback?: boolean;
}

/** Each cgroup mechanism of this host, tried in order: a backend, or why it cannot be used. */
export type CgroupAttempt = () => Promise<CgroupLimitBackend | string>;

async function hostCgroupAttempts(cgroupParent: string | undefined): Promise<CgroupAttempt[]> {
  const mounts = parseCgroupMounts((await readText('/proc/self/mountinfo')) ?? '');
  const entries = parseProcCgroup((await readText('/proc/self/cgroup')) ?? '');
  return [() => tryCgroupV2(mounts, entries, cgroupParent), () => tryCgroupV1(mounts, entries)];
}

/**
 * The refusal when no cgroup can cap a sandbox: what failed, and the three ways out. Short on
 * purpose (it ends up in `sandbox_unavailable`): what the rlimit mode loses is in
 * docs/security.md#isolation-tiers. A non-root daemon is said to be one, since that is the usual
 * cause (its cgroup is not writable by it unless delegated).
 */
export function noCgroupMessage(reasons: readonly string[], uid: number = process.getuid?.() ?? 0): string {
  const who = uid === 0 ? '' : ` for this non-root daemon (uid ${String(uid)})`;
  return `no writable cgroup${who} to cap the sandboxes' memory and processes (${reasons.join('; ')}); ` +
    `refusing the weaker rlimit mode (memory is not really capped, docs/security.md#isolation-tiers) unless accepted with ${RLIMIT_OPT_IN_ENV}=1 ` +
    '(--sandbox-rlimit-fallback); or run the daemon as root, or give it a delegated cgroup';
}

/**
 * Finds the best working cap mechanism; throws (with every reason) when none works or is allowed.
 * `attempts` replaces the host's cgroup mechanisms (tests).
 */
export async function detectLimitBackend(options: DetectOptions = {}, attempts?: CgroupAttempt[]): Promise<LimitBackend> {
  const preference = options.preference ?? 'auto';
  const prlimitPath = options.prlimitPath ?? '/usr/bin/prlimit';
  const reasons: string[] = [];
  if (preference !== 'rlimit') {
    for (const attempt of attempts ?? (await hostCgroupAttempts(options.cgroupParent))) {
      const result = await attempt();
      if (typeof result !== 'string') return result;
      reasons.push(result);
    }
    if (preference === 'cgroup') throw new Error(`no usable cgroup: ${reasons.join('; ')}`);
    if (options.allowRlimitFallback !== true) {
      throw new Error(noCgroupMessage(reasons));
    }
  } else {
    reasons.push('rlimit chosen by configuration');
  }
  try {
    await access(prlimitPath, fsConstants.X_OK);
  } catch {
    reasons.push(`${prlimitPath} is missing (apt-get install util-linux)`);
    throw new Error(`no memory/process cap mechanism: ${reasons.join('; ')}`);
  }
  return rlimitBackend(prlimitPath, reasons.join('; '));
}
