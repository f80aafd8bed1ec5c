/**
 * The sandbox's seccomp policy as data: which syscalls are denied, per architecture.
 *
 * Default-allow with a deny list (like Docker's spirit, much shorter): bwrap already drops every
 * capability, sets no_new_privs and forbids new user namespaces, so most of these would fail
 * anyway. The filter is the second wall: it removes kernel attack surface (io_uring, bpf,
 * perf, keyrings, userfaultfd) and the syscalls that would let a child inspect or escape its
 * namespaces (ptrace, process_vm_*, setns, unshare, mount API), even if a capability leaked.
 *
 * Numbers are from the kernel's uapi headers (`asm/unistd_64.h` for x86_64, the generic
 * `asm-generic/unistd.h` table for aarch64); a unit test compares them with the headers when
 * they are installed.
 */

/** `AUDIT_ARCH_*` values as they appear in `seccomp_data.arch`. */
export const AUDIT_ARCH = {
  x86_64: 0xc000003e,
  aarch64: 0xc00000b7,
} as const;

export type SeccompArch = keyof typeof AUDIT_ARCH;

/** x86_64 syscalls with this bit set are the x32 ABI: a second syscall table we never allow. */
export const X32_SYSCALL_BIT = 0x40000000;

export const AF_UNIX = 1;

/**
 * `clone()` flags that create namespaces. Denied in `clone`'s first argument (flags on both
 * arches), so a child cannot build new namespaces even where `--disable-userns` would not stop
 * it. Threads and plain forks use none of these.
 */
export const CLONE_NAMESPACE_FLAGS =
  0x00020000 | // CLONE_NEWNS
  0x02000000 | // CLONE_NEWCGROUP
  0x04000000 | // CLONE_NEWUTS
  0x08000000 | // CLONE_NEWIPC
  0x10000000 | // CLONE_NEWUSER
  0x20000000 | // CLONE_NEWPID
  0x40000000; //  CLONE_NEWNET

/** Syscall numbers the filter needs to know, per architecture. */
export interface SyscallTable {
  /** Denied with EPERM, whatever the arguments. */
  denied: Readonly<Record<string, number>>;
  /** Allowed only for AF_UNIX (checked on args[0], the domain). */
  socket: number;
  socketpair: number;
  /** Allowed unless a namespace flag is set in args[0]. */
  clone: number;
  /**
   * Answered with ENOSYS, not EPERM: clone3 passes its flags in memory, which a classic BPF
   * filter cannot read, and glibc (pthread_create, posix_spawn) falls back to clone() on ENOSYS,
   * where the flags are checked.
   */
  clone3: number;
}

export const SYSCALLS: Readonly<Record<SeccompArch, SyscallTable>> = {
  x86_64: {
    denied: {
      // Async I/O rings: a large, often-exploited kernel surface; libuv falls back to threads.
      io_uring_setup: 425,
      io_uring_enter: 426,
      io_uring_register: 427,
      // Inspecting or writing other processes.
      ptrace: 101,
      process_vm_readv: 310,
      process_vm_writev: 311,
      pidfd_getfd: 438,
      process_madvise: 440,
      // eBPF and perf: kernel programmability and side channels.
      bpf: 321,
      perf_event_open: 298,
      // Replacing or extending the kernel.
      kexec_load: 246,
      kexec_file_load: 320,
      init_module: 175,
      finit_module: 313,
      delete_module: 176,
      // Mounts and namespaces (old and new mount API).
      mount: 165,
      umount2: 166,
      pivot_root: 155,
      chroot: 161,
      unshare: 272,
      setns: 308,
      open_tree: 428,
      move_mount: 429,
      fsopen: 430,
      fsconfig: 431,
      fsmount: 432,
      fspick: 433,
      mount_setattr: 442,
      // Kernel keyrings (shared per uid across the host).
      keyctl: 250,
      add_key: 248,
      request_key: 249,
      // Page-fault handling from user space: a race amplifier for kernel exploits.
      userfaultfd: 323,
      // File handles bypass path-based confinement (the "shocker" escape).
      open_by_handle_at: 304,
      name_to_handle_at: 303,
      // Host administration.
      swapon: 167,
      swapoff: 168,
      reboot: 169,
      acct: 163,
      syslog: 103,
      quotactl: 179,
      lookup_dcookie: 212,
      fanotify_init: 300,
      vhangup: 153,
      uselib: 134,
      iopl: 172,
      ioperm: 173,
    },
    socket: 41,
    socketpair: 53,
    clone: 56,
    clone3: 435,
  },
  aarch64: {
    denied: {
      io_uring_setup: 425,
      io_uring_enter: 426,
      io_uring_register: 427,
      ptrace: 117,
      process_vm_readv: 270,
      process_vm_writev: 271,
      pidfd_getfd: 438,
      process_madvise: 440,
      bpf: 280,
      perf_event_open: 241,
      kexec_load: 104,
      kexec_file_load: 294,
      init_module: 105,
      finit_module: 273,
      delete_module: 106,
      mount: 40,
      umount2: 39,
      pivot_root: 41,
      chroot: 51,
      unshare: 97,
      setns: 268,
      open_tree: 428,
      move_mount: 429,
      fsopen: 430,
      fsconfig: 431,
      fsmount: 432,
      fspick: 433,
      mount_setattr: 442,
      keyctl: 219,
      add_key: 217,
      request_key: 218,
      userfaultfd: 282,
      open_by_handle_at: 265,
      name_to_handle_at: 264,
      swapon: 224,
      swapoff: 225,
      reboot: 142,
      acct: 89,
      syslog: 116,
      quotactl: 60,
      lookup_dcookie: 18,
      fanotify_init: 262,
      vhangup: 58,
    },
    socket: 198,
    socketpair: 199,
    clone: 220,
    clone3: 435,
  },
};
