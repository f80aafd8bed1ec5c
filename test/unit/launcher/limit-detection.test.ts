/**
 * Which cap mechanism bwrap uses (src/launcher/process-limits.ts): the weak rlimit mode is never
 * chosen silently — without a usable cgroup and without the admin's opt-in, sandboxes are refused
 * and the refusal says what would be lost.
 */
import { describe, expect, it } from 'vitest';
import { detectLimitBackend, RLIMIT_OPT_IN_ENV, type CgroupAttempt } from '../../../src/launcher/process-limits.js';

const NO_CGROUPS: CgroupAttempt[] = [async () => 'no cgroup2 hierarchy', async () => 'no cgroup v1 memory+pids hierarchies'];
const PRLIMIT = '/usr/bin/prlimit';

describe('detectLimitBackend', () => {
  it('refuses a host without a usable cgroup unless the admin opted in, naming what is lost', async () => {
    const refusal = detectLimitBackend({ prlimitPath: PRLIMIT }, NO_CGROUPS);
    await expect(refusal).rejects.toThrow(/refusing the weaker rlimit mode/);
    await expect(refusal).rejects.toThrow(/memory is not really capped/);
    await expect(refusal).rejects.toThrow(new RegExp(`${RLIMIT_OPT_IN_ENV}=1`));
    await expect(refusal).rejects.toThrow(/no cgroup2 hierarchy; no cgroup v1/);
  });

  it('falls back to rlimits with the opt-in', async () => {
    const backend = await detectLimitBackend({ prlimitPath: PRLIMIT, allowRlimitFallback: true }, NO_CGROUPS);
    expect(backend.mechanism).toBe('rlimit');
  });

  it('an explicit rlimit preference is the opt-in; cgroup never falls back', async () => {
    expect((await detectLimitBackend({ prlimitPath: PRLIMIT, preference: 'rlimit' }, NO_CGROUPS)).mechanism).toBe('rlimit');
    await expect(detectLimitBackend({ prlimitPath: PRLIMIT, preference: 'cgroup', allowRlimitFallback: true }, NO_CGROUPS)).rejects.toThrow(/no usable cgroup/);
  });

  it('a working cgroup wins without asking', async () => {
    const cgroup: CgroupAttempt = async () => ({ mechanism: 'cgroup-v1', detail: 'fake', create: async () => { throw new Error('unused'); } });
    expect((await detectLimitBackend({ prlimitPath: PRLIMIT }, [NO_CGROUPS[0] as CgroupAttempt, cgroup])).mechanism).toBe('cgroup-v1');
  });
});
