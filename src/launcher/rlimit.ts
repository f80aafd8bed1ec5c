/**
 * The weak cap mechanism: `prlimit --data --nproc` on bwrap, for hosts where no cgroup can be
 * written. RLIMIT_DATA (private writable memory) is used instead of RLIMIT_AS because V8 reserves
 * large address ranges it never touches and aborts at start under a tight RLIMIT_AS. RLIMIT_NPROC
 * counts every task of the *host uid*, so the cap is set to (tasks the uid already has +
 * maxProcesses): concurrent sandboxes sharing the uid share that headroom.
 *
 * What it does not do (why it needs the admin's opt-in, see `detectLimitBackend`): memory that
 * is not private data (file mappings, tmpfs pages, page cache, kernel memory) is not capped, each
 * process gets its own RLIMIT_DATA (so N processes may use N times the cap), the process cap is
 * shared with everything else of the uid, and there is no OOM accounting.
 */
import type { ProcessCaps } from './cgroup-groups.js';
import { countTasksOfUid } from './proc-files.js';
import type { RlimitLimitBackend } from './process-limits.js';

export function rlimitBackend(prlimitPath: string, why: string): RlimitLimitBackend {
  return {
    mechanism: 'rlimit',
    detail: `${prlimitPath} (RLIMIT_DATA, RLIMIT_NPROC); cgroups not used: ${why}`,
    async commandPrefix(caps: ProcessCaps, uid: number) {
      const nproc = (await countTasksOfUid(uid)) + caps.maxProcesses;
      return [prlimitPath, `--data=${caps.memoryBytes}`, `--nproc=${nproc}`, '--'];
    },
  };
}
