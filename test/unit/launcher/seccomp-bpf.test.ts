/**
 * The seccomp program, run through a small classic-BPF interpreter over `struct seccomp_data`,
 * plus a check of the syscall tables against the kernel headers when they are installed.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  buildSeccompFilter, encodeSockFilters, ENOSYS, EPERM, SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS,
  seccompProgram, type SockFilter,
} from '../../../src/launcher/seccomp-bpf.js';
import { AUDIT_ARCH, SYSCALLS, X32_SYSCALL_BIT, type SeccompArch } from '../../../src/launcher/seccomp-policy.js';

/** Executes a classic BPF program the way the kernel's seccomp does (the opcodes we emit). */
function runFilter(filters: readonly SockFilter[], data: Buffer): number {
  let acc = 0;
  for (let pc = 0; pc < filters.length; ) {
    const f = filters[pc] as SockFilter;
    switch (f.code) {
      case 0x20: // ld [k]
        acc = data.readUInt32LE(f.k);
        pc += 1;
        break;
      case 0x05: // ja k
        pc += 1 + f.k;
        break;
      case 0x15: // jeq k
        pc += 1 + (acc === f.k ? f.jt : f.jf);
        break;
      case 0x35: // jge k
        pc += 1 + (acc >= f.k ? f.jt : f.jf);
        break;
      case 0x45: // jset k
        pc += 1 + ((acc & f.k) !== 0 ? f.jt : f.jf);
        break;
      case 0x06: // ret k
        return f.k;
      default:
        throw new Error(`unexpected opcode ${f.code}`);
    }
  }
  throw new Error('fell off the end of the program');
}

function seccompData(arch: number, nr: number, args: number[] = []): Buffer {
  const data = Buffer.alloc(64);
  data.writeInt32LE(nr, 0);
  data.writeUInt32LE(arch, 4);
  args.forEach((a, i) => data.writeBigUInt64LE(BigInt(a), 16 + i * 8));
  return data;
}

const filters = buildSeccompFilter();
const verdict = (arch: SeccompArch, nr: number, args: number[] = []): number => runFilter(filters, seccompData(AUDIT_ARCH[arch], nr, args));
const DENY = (SECCOMP_RET_ERRNO | EPERM) >>> 0;
const NOSYS = (SECCOMP_RET_ERRNO | ENOSYS) >>> 0;

describe('seccomp filter', () => {
  it('encodes 8-byte little-endian sock_filter records', () => {
    const bytes = encodeSockFilters([{ code: 0x15, jt: 2, jf: 3, k: 0xc000003e }]);
    expect([...bytes]).toEqual([0x15, 0x00, 0x02, 0x03, 0x3e, 0x00, 0x00, 0xc0]);
    expect(seccompProgram().length).toBe(filters.length * 8);
    expect(filters.length).toBeLessThan(4096); // BPF_MAXINSNS
  });

  for (const arch of Object.keys(AUDIT_ARCH) as SeccompArch[]) {
    describe(arch, () => {
      const table = SYSCALLS[arch];

      it('denies every listed syscall with EPERM, whatever the arguments', () => {
        for (const [name, nr] of Object.entries(table.denied)) {
          expect({ name, verdict: verdict(arch, nr, [1, 2, 3]) }).toEqual({ name, verdict: DENY });
        }
        for (const name of ['io_uring_setup', 'io_uring_enter', 'io_uring_register', 'ptrace', 'process_vm_readv',
          'process_vm_writev', 'bpf', 'perf_event_open', 'kexec_load', 'kexec_file_load', 'mount', 'umount2',
          'unshare', 'setns', 'keyctl', 'add_key', 'request_key']) {
          expect(table.denied[name], name).toBeTypeOf('number');
        }
      });

      it('allows ordinary syscalls', () => {
        for (const nr of [0, 1, 2, 3, 9, 60, 63, 231]) {
          if (Object.values(table.denied).includes(nr) || [table.socket, table.socketpair, table.clone].includes(nr)) continue;
          expect(verdict(arch, nr)).toBe(SECCOMP_RET_ALLOW);
        }
      });

      it('allows socket() and socketpair() only for AF_UNIX', () => {
        for (const nr of [table.socket, table.socketpair]) {
          expect(verdict(arch, nr, [1, 1, 0])).toBe(SECCOMP_RET_ALLOW); // AF_UNIX
          for (const domain of [2, 10, 16, 17, 0, 0x100000002]) expect(verdict(arch, nr, [domain, 1, 0])).toBe(DENY);
          // The kernel takes the domain as an int (low 32 bits): 0x1_00000001 *is* AF_UNIX.
          expect(verdict(arch, nr, [0x100000001, 1, 0])).toBe(SECCOMP_RET_ALLOW);
        }
      });

      it('answers clone3 with ENOSYS so libc falls back to clone', () => {
        expect(verdict(arch, table.clone3)).toBe(NOSYS);
      });

      it('allows thread and process clones but not namespace-creating ones', () => {
        const threadFlags = 0x3d0f00; // CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID
        expect(verdict(arch, table.clone, [threadFlags])).toBe(SECCOMP_RET_ALLOW);
        expect(verdict(arch, table.clone, [17])).toBe(SECCOMP_RET_ALLOW); // SIGCHLD: fork()
        for (const ns of [0x10000000, 0x20000000, 0x40000000, 0x00020000, 0x08000000, 0x04000000, 0x02000000]) {
          expect(verdict(arch, table.clone, [17 | ns])).toBe(DENY);
        }
      });
    });
  }

  it('denies the x32 ABI on x86_64', () => {
    expect(verdict('x86_64', X32_SYSCALL_BIT | 0)).toBe(DENY);
    expect(verdict('x86_64', X32_SYSCALL_BIT | 41)).toBe(DENY);
  });

  it('kills a process calling through a foreign ABI (i386 int 0x80, arm32)', () => {
    expect(runFilter(filters, seccompData(0x40000003, 1))).toBe(SECCOMP_RET_KILL_PROCESS);
    expect(runFilter(filters, seccompData(0x40000028, 1))).toBe(SECCOMP_RET_KILL_PROCESS);
  });

  const headers: Array<[SeccompArch, string]> = [
    ['x86_64', '/usr/include/x86_64-linux-gnu/asm/unistd_64.h'],
    ['aarch64', '/usr/include/asm-generic/unistd.h'],
  ];
  for (const [arch, header] of headers) {
    it.skipIf(!existsSync(header))(`${arch} numbers match ${header}`, () => {
      const text = readFileSync(header, 'utf8');
      const table = SYSCALLS[arch];
      const all: Record<string, number> = { ...table.denied, socket: table.socket, socketpair: table.socketpair, clone: table.clone, clone3: table.clone3 };
      for (const [name, nr] of Object.entries(all)) {
        const match = new RegExp(`#define __NR(?:3264)?_${name}\\s+(\\d+)`).exec(text);
        expect({ name, nr: match ? Number(match[1]) : null }).toEqual({ name, nr });
      }
    });
  }
});
