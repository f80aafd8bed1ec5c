/**
 * Assembles the sandbox's seccomp filter as classic BPF, in TypeScript (no libseccomp, no
 * native addon). bwrap loads it with `--seccomp FD`: the bytes are an array of
 * `struct sock_filter { u16 code; u8 jt; u8 jf; u32 k; }`, 8 bytes each, in host byte order
 * (little-endian on both supported arches).
 *
 * Program shape (every jump is forward, as classic BPF requires):
 *
 *   load arch; x86_64 → x86 table; aarch64 → arm table; anything else → KILL_PROCESS
 *   x86: load nr; nr ≥ x32 bit → EPERM; then the shared table walk
 *   per table: denied → EPERM; clone3 → ENOSYS; socket/socketpair → domain check;
 *              clone → namespace-flag check; otherwise ALLOW
 *   domain check: args[0] == AF_UNIX → ALLOW else EPERM
 *   clone check:  args[0] & namespace flags → EPERM else ALLOW
 */
import { AF_UNIX, AUDIT_ARCH, CLONE_NAMESPACE_FLAGS, SYSCALLS, X32_SYSCALL_BIT, type SeccompArch, type SyscallTable } from './seccomp-policy.js';

// Opcodes (linux/filter.h, linux/bpf_common.h).
const BPF_LD_W_ABS = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JMP_JA = 0x05; // BPF_JMP | BPF_JA
const BPF_JEQ_K = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_JGE_K = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const BPF_JSET_K = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const BPF_RET_K = 0x06; // BPF_RET | BPF_K

// Return values (linux/seccomp.h).
export const SECCOMP_RET_KILL_PROCESS = 0x80000000;
export const SECCOMP_RET_ERRNO = 0x00050000;
export const SECCOMP_RET_ALLOW = 0x7fff0000;
export const EPERM = 1;
export const ENOSYS = 38;

// Offsets into struct seccomp_data { int nr; u32 arch; u64 ip; u64 args[6]; }.
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
/** Low 32 bits of args[0] on a little-endian machine: enough for an int domain or clone flags. */
const OFFSET_ARG0_LOW = 16;

export interface SockFilter {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

type Target = number | string; // relative offset, or a label resolved at assembly time

interface PendingInsn {
  code: number;
  jt: Target;
  jf: Target;
  k: number;
}

/** A tiny assembler: instructions with symbolic forward jumps. */
class Assembler {
  private readonly insns: PendingInsn[] = [];
  private readonly labels = new Map<string, number>();
  private readonly jaTargets = new Map<number, string>();

  label(name: string): void {
    if (this.labels.has(name)) throw new Error(`duplicate BPF label ${name}`);
    this.labels.set(name, this.insns.length);
  }

  load(offset: number): void {
    this.insns.push({ code: BPF_LD_W_ABS, jt: 0, jf: 0, k: offset });
  }

  jeq(k: number, jt: Target, jf: Target = 0): void {
    this.insns.push({ code: BPF_JEQ_K, jt, jf, k: k >>> 0 });
  }

  jge(k: number, jt: Target, jf: Target = 0): void {
    this.insns.push({ code: BPF_JGE_K, jt, jf, k: k >>> 0 });
  }

  jset(k: number, jt: Target, jf: Target = 0): void {
    this.insns.push({ code: BPF_JSET_K, jt, jf, k: k >>> 0 });
  }

  /** Unconditional jump; `k` holds the (32-bit) offset, so any distance works. */
  ja(target: string): void {
    this.insns.push({ code: BPF_JMP_JA, jt: 0, jf: 0, k: 0 });
    this.jaTargets.set(this.insns.length - 1, target);
  }

  ret(k: number): void {
    this.insns.push({ code: BPF_RET_K, jt: 0, jf: 0, k: k >>> 0 });
  }

  assemble(): SockFilter[] {
    return this.insns.map((insn, index) => {
      const resolve = (target: Target): number => {
        if (typeof target === 'number') return target;
        const at = this.labels.get(target);
        if (at === undefined) throw new Error(`unknown BPF label ${target}`);
        const offset = at - (index + 1);
        if (offset < 0) throw new Error(`backward BPF jump to ${target}`);
        return offset;
      };
      const jaTarget = this.jaTargets.get(index);
      if (jaTarget !== undefined) return { code: insn.code, jt: 0, jf: 0, k: resolve(jaTarget) };
      const jt = resolve(insn.jt);
      const jf = resolve(insn.jf);
      if (jt > 255 || jf > 255) throw new Error('BPF conditional jump longer than 255 instructions');
      return { code: insn.code, jt, jf, k: insn.k };
    });
  }
}

function emitTable(asm: Assembler, table: SyscallTable): void {
  for (const nr of Object.values(table.denied)) asm.jeq(nr, 'eperm');
  asm.jeq(table.clone3, 'enosys');
  asm.jeq(table.socket, 'socket_domain');
  asm.jeq(table.socketpair, 'socket_domain');
  asm.jeq(table.clone, 'clone_flags');
  asm.ja('allow');
}

/** The filter as instructions (exported for tests, which run it through an emulator). */
export function buildSeccompFilter(): SockFilter[] {
  const asm = new Assembler();
  const arches = Object.keys(AUDIT_ARCH) as SeccompArch[];

  asm.load(OFFSET_ARCH);
  asm.jeq(AUDIT_ARCH.x86_64, 'arch_x86_64');
  asm.jeq(AUDIT_ARCH.aarch64, 'arch_aarch64');
  // A foreign ABI (e.g. i386 through int 0x80 on an x86_64 host) has other syscall numbers:
  // the deny list would mean nothing there, so the process dies instead.
  asm.ret(SECCOMP_RET_KILL_PROCESS);

  for (const arch of arches) {
    asm.label(`arch_${arch}`);
    asm.load(OFFSET_NR);
    // The x32 ABI shares AUDIT_ARCH_X86_64 but numbers syscalls from 0x40000000.
    if (arch === 'x86_64') asm.jge(X32_SYSCALL_BIT, 'eperm');
    emitTable(asm, SYSCALLS[arch]);
  }

  asm.label('socket_domain');
  asm.load(OFFSET_ARG0_LOW);
  asm.jeq(AF_UNIX, 'allow', 'eperm');

  asm.label('clone_flags');
  asm.load(OFFSET_ARG0_LOW);
  asm.jset(CLONE_NAMESPACE_FLAGS, 'eperm', 'allow');

  asm.label('eperm');
  asm.ret(SECCOMP_RET_ERRNO | EPERM);
  asm.label('enosys');
  asm.ret(SECCOMP_RET_ERRNO | ENOSYS);
  asm.label('allow');
  asm.ret(SECCOMP_RET_ALLOW);

  return asm.assemble();
}

/** Serialises instructions as `struct sock_filter[]` (little-endian). */
export function encodeSockFilters(filters: readonly SockFilter[]): Buffer {
  const out = Buffer.alloc(filters.length * 8);
  filters.forEach((f, i) => {
    out.writeUInt16LE(f.code, i * 8);
    out.writeUInt8(f.jt, i * 8 + 2);
    out.writeUInt8(f.jf, i * 8 + 3);
    out.writeUInt32LE(f.k >>> 0, i * 8 + 4);
  });
  return out;
}

let cached: Buffer | undefined;

/** The compiled program bytes for `bwrap --seccomp FD` (built once per process). */
export function seccompProgram(): Buffer {
  cached ??= encodeSockFilters(buildSeccompFilter());
  return cached;
}
