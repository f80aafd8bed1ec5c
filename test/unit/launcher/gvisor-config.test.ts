/**
 * The gVisor tier's container shape (docs/security.md#isolation-tiers): Docker's configuration
 * with the runsc runtime, the child's process cap as RLIMIT_NPROC with headroom for the Sentry in
 * the pids cgroup, and the policy's seccomp profile minus its clone3 rule only.
 */
import { describe, expect, it } from 'vitest';
import { dockerSeccompSecurityOpt } from '../../../src/launcher/docker-seccomp.js';
import { containerConfig } from '../../../src/launcher/docker-config.js';
import { gvisorSeccompOpt } from '../../../src/launcher/gvisor.js';
import { DEFAULT_SANDBOX_LIMITS } from '../../../src/launcher/port.js';

const spec = { taskId: 't', label: 'candidate-1.attempt-1', repoDir: '/r', outDir: '/o', command: ['node', '-e', '0'], limits: { ...DEFAULT_SANDBOX_LIMITS, maxProcesses: 40 } };
const base = { spec, image: 'fusion-child:test', identity: { uid: 2_100_000_007, gid: 2_100_000_007, dropPrivileges: true }, nanoCpus: 1e9, owner: 'me', seccompOpt: 'seccomp={}' };

describe('gVisor container configuration', () => {
  it('runc by default: no runtime key, the pids cgroup is the process cap, no nproc rlimit; the uid is on a label', () => {
    const config = containerConfig(base);
    const host = config.HostConfig as Record<string, any>;
    expect(host.Runtime).toBeUndefined();
    expect(host.PidsLimit).toBe(40);
    expect((host.Ulimits as Array<{ Name: string }>).map((u) => u.Name)).not.toContain('nproc');
    expect(config.User).toBe('2100000007:2100000007');
    expect(config.Labels?.['org.fusion.uid']).toBe('2100000007');
  });

  it('runsc: the runtime, RLIMIT_NPROC as the child cap, headroom for the Sentry in the pids cgroup', () => {
    const host = containerConfig({ ...base, runtime: 'runsc', pidsHeadroom: 384 }).HostConfig as Record<string, any>;
    expect(host.Runtime).toBe('runsc');
    expect(host.PidsLimit).toBe(40 + 384);
    expect(host.Ulimits).toContainEqual({ Name: 'nproc', Soft: 40, Hard: 40 });
  });

  it('the seccomp profile loses its clone3 rule and nothing else', () => {
    const policy = dockerSeccompSecurityOpt('x86_64');
    const parse = (opt: string): { defaultAction: string; syscalls: Array<{ names: string[] }> } => JSON.parse(opt.slice(opt.indexOf('=') + 1));
    const before = parse(policy);
    const after = parse(gvisorSeccompOpt(policy));
    expect(before.syscalls.some((r) => r.names.includes('clone3'))).toBe(true);
    expect(after.syscalls.some((r) => r.names.includes('clone3'))).toBe(false);
    expect(after.syscalls).toEqual(before.syscalls.filter((r) => !r.names.includes('clone3')));
    expect(after.defaultAction).toBe(before.defaultAction);
    expect(gvisorSeccompOpt(policy).startsWith('seccomp=')).toBe(true);
  });
});
