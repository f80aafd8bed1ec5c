/**
 * The Docker backend's seccomp profile, generated from the same policy as the bwrap filter
 * (`seccomp-policy.ts`), so both tiers deny exactly the same things.
 *
 * Why not Docker's default profile: Docker 20.10's default still allows io_uring (a large,
 * often-exploited kernel surface), every socket family but AF_VSOCK, and ptrace on new kernels.
 * This profile is default-allow with the policy's deny list (EPERM), exactly like the bwrap
 * filter; the rest of the hardening (no capabilities, no_new_privs, no network) comes from the
 * container flags, so the syscalls Docker's allowlist removes for capability reasons fail anyway.
 *
 * Rules (each mirrors a rule of the bwrap filter):
 *  - every syscall in `SYSCALLS[arch].denied` → EPERM;
 *  - socket()/socketpair() with a domain other than AF_UNIX → EPERM (AF_INET, AF_INET6,
 *    AF_NETLINK, AF_PACKET, AF_VSOCK…): the broker socket is the only channel out;
 *  - clone() with any namespace flag → EPERM (one rule per flag: libseccomp ORs rules of the
 *    same syscall, and "masked value is non-zero" has no single comparison);
 *  - clone3() → ENOSYS: its flags live in memory a filter cannot read, and libc falls back to
 *    clone() on ENOSYS, where the flags are checked.
 * Only the native architecture is listed: libseccomp kills syscalls from any other ABI (i386
 * via int 0x80, x32), which the bwrap filter denies as well.
 */
import { AF_UNIX, CLONE_NAMESPACE_FLAGS, SYSCALLS, type SeccompArch } from './seccomp-policy.js';

const EPERM = 1;
const ENOSYS = 38;

const DOCKER_ARCH: Readonly<Record<SeccompArch, string>> = {
  x86_64: 'SCMP_ARCH_X86_64',
  aarch64: 'SCMP_ARCH_AARCH64',
};

export interface DockerSeccompArg {
  index: number;
  value: number;
  valueTwo?: number;
  op: 'SCMP_CMP_NE' | 'SCMP_CMP_MASKED_EQ' | 'SCMP_CMP_EQ';
}

export interface DockerSeccompRule {
  names: string[];
  action: 'SCMP_ACT_ERRNO';
  errnoRet: number;
  args?: DockerSeccompArg[];
  comment?: string;
}

/** The JSON shape Docker's `--security-opt seccomp=` accepts (moby `types.Seccomp`). */
export interface DockerSeccompProfile {
  defaultAction: 'SCMP_ACT_ALLOW';
  architectures: string[];
  syscalls: DockerSeccompRule[];
}

/** The seccomp architecture of this process, or null when the policy has no table for it. */
export function hostSeccompArch(arch: string = process.arch): SeccompArch | null {
  if (arch === 'x64') return 'x86_64';
  if (arch === 'arm64') return 'aarch64';
  return null;
}

/** Lists the single bits of a mask (lowest first). */
function bits(mask: number): number[] {
  const out: number[] = [];
  for (let bit = 1; bit !== 0 && bit <= mask; bit = (bit << 1) >>> 0) if ((mask & bit) >>> 0 === bit) out.push(bit);
  return out;
}

export function dockerSeccompProfile(arch: SeccompArch): DockerSeccompProfile {
  const table = SYSCALLS[arch];
  const syscalls: DockerSeccompRule[] = [
    { names: Object.keys(table.denied).sort(), action: 'SCMP_ACT_ERRNO', errnoRet: EPERM, comment: 'seccomp-policy.ts deny list' },
    {
      names: ['socket', 'socketpair'],
      action: 'SCMP_ACT_ERRNO',
      errnoRet: EPERM,
      args: [{ index: 0, value: AF_UNIX, op: 'SCMP_CMP_NE' }],
      comment: 'only AF_UNIX sockets',
    },
    ...bits(CLONE_NAMESPACE_FLAGS).map((bit): DockerSeccompRule => ({
      names: ['clone'],
      action: 'SCMP_ACT_ERRNO',
      errnoRet: EPERM,
      args: [{ index: 0, value: bit, valueTwo: bit, op: 'SCMP_CMP_MASKED_EQ' }],
      comment: `clone with namespace flag 0x${bit.toString(16)}`,
    })),
    { names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: ENOSYS, comment: 'ENOSYS: libc falls back to clone()' },
  ];
  return { defaultAction: 'SCMP_ACT_ALLOW', architectures: [DOCKER_ARCH[arch]], syscalls };
}

/** The `SecurityOpt` entry carrying the profile (the API takes the JSON itself, not a path). */
export function dockerSeccompSecurityOpt(arch: SeccompArch): string {
  return `seccomp=${JSON.stringify(dockerSeccompProfile(arch))}`;
}
