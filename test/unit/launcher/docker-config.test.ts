/**
 * The Docker backend's pure parts: the seccomp profile is generated from the bwrap filter's
 * policy (one list, two tiers), and the container configuration carries every hardening flag.
 * No engine needed.
 */
import { describe, expect, it } from 'vitest';
import { dockerSeccompProfile, dockerSeccompSecurityOpt, hostSeccompArch } from '../../../src/launcher/docker-seccomp.js';
import { CHILD_IMAGE, childImage, containerConfig, LABELS } from '../../../src/launcher/docker-config.js';
import { cpuSecondsCap } from '../../../src/launcher/docker-deadline-keeper.js';
import { AF_UNIX, CLONE_NAMESPACE_FLAGS, SYSCALLS } from '../../../src/launcher/seccomp-policy.js';
import { DEFAULT_SANDBOX_LIMITS, SANDBOX_PATHS } from '../../../src/launcher/port.js';
import { readFileSync } from 'node:fs';

describe('docker seccomp profile', () => {
  for (const arch of ['x86_64', 'aarch64'] as const) {
    it(`[${arch}] denies exactly the policy's syscalls with EPERM, non-AF_UNIX sockets, namespace clones; clone3 ENOSYS`, () => {
      const profile = dockerSeccompProfile(arch);
      expect(profile.defaultAction).toBe('SCMP_ACT_ALLOW');
      expect(profile.architectures).toEqual([arch === 'x86_64' ? 'SCMP_ARCH_X86_64' : 'SCMP_ARCH_AARCH64']);
      const denied = profile.syscalls.filter((r) => r.args === undefined && r.errnoRet === 1).flatMap((r) => r.names);
      expect(denied.sort()).toEqual(Object.keys(SYSCALLS[arch].denied).sort());
      for (const name of ['io_uring_setup', 'io_uring_enter', 'io_uring_register', 'ptrace', 'process_vm_readv', 'process_vm_writev', 'bpf', 'perf_event_open', 'unshare', 'setns', 'mount', 'keyctl']) {
        expect(denied).toContain(name);
      }
      const socketRule = profile.syscalls.find((r) => r.names.includes('socket'));
      expect(socketRule).toMatchObject({ names: ['socket', 'socketpair'], errnoRet: 1, args: [{ index: 0, value: AF_UNIX, op: 'SCMP_CMP_NE' }] });
      const cloneRules = profile.syscalls.filter((r) => r.names.includes('clone'));
      const maskOr = cloneRules.reduce((acc, r) => acc | (r.args?.[0]?.value ?? 0), 0);
      expect(maskOr).toBe(CLONE_NAMESPACE_FLAGS);
      for (const r of cloneRules) expect(r.args?.[0]).toMatchObject({ index: 0, op: 'SCMP_CMP_MASKED_EQ', valueTwo: r.args?.[0]?.value });
      expect(profile.syscalls.find((r) => r.names.includes('clone3'))).toMatchObject({ errnoRet: 38 });
    });
  }

  it('is passed inline as a SecurityOpt', () => {
    const arch = hostSeccompArch();
    if (arch === null) return;
    const opt = dockerSeccompSecurityOpt(arch);
    expect(opt.startsWith('seccomp={')).toBe(true);
    expect(JSON.parse(opt.slice('seccomp='.length))).toEqual(dockerSeccompProfile(arch));
  });
});

describe('docker container configuration', () => {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };

  it('names the image after the package version', () => {
    expect(CHILD_IMAGE).toBe(`fusion-child:${pkg.version}`);
    expect(childImage('9.9.9')).toBe('fusion-child:9.9.9');
  });

  it('binds the capped /out tmpfs instead of the outDir when there is one, and keeps a HOSTNAME the spec sets', () => {
    const config = containerConfig({
      spec: { taskId: 't', label: 'l', repoDir: '/r', outDir: '/o', command: ['node'], env: { HOSTNAME: 'given' }, limits: DEFAULT_SANDBOX_LIMITS },
      image: 'fusion-child:test', identity: { uid: 65534, gid: 65534, dropPrivileges: true }, nanoCpus: 1e9, owner: 'me',
      seccompOpt: 'seccomp={}', outSource: '/run/fusion-sandbox-out/1.2.abc',
    });
    const mounts = (config.HostConfig?.Mounts ?? []) as Array<{ Source: string; Target: string }>;
    expect(mounts.find((m) => m.Target === SANDBOX_PATHS.out)?.Source).toBe('/run/fusion-sandbox-out/1.2.abc');
    expect(config.Env).toContain('HOSTNAME=given');
    expect(config.Env).not.toContain('HOSTNAME');
  });

  it('carries every hardening flag, the limits, the labels and the binds', () => {
    const limits = { ...DEFAULT_SANDBOX_LIMITS, memoryBytes: 300 * 1024 * 1024, maxProcesses: 50, tmpfsBytes: 8 * 1024 * 1024 };
    const config = containerConfig({
      spec: {
        taskId: 'task/1', label: 'candidate-1.attempt-1', repoDir: '/r', outDir: '/o', codeDir: '/c', brokerSocketPath: '/s/broker.sock',
        command: ['node', '/opt/fusion/sandbox/child-main.js'], env: { HOME: '/tmp', NODE_OPTIONS: '--max-old-space-size=512' }, limits,
      },
      image: 'fusion-child:test', identity: { uid: 65534, gid: 65534, dropPrivileges: true }, nanoCpus: 1e9, owner: 'me',
      requestCopy: '/x/request.json', seccompOpt: 'seccomp={}',
    });
    const host = config.HostConfig as Record<string, any>;
    expect(host).toMatchObject({
      NetworkMode: 'none', ReadonlyRootfs: true, CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges:true', 'seccomp={}'],
      PidsLimit: 50, Memory: 300 * 1024 * 1024, MemorySwap: 300 * 1024 * 1024, NanoCpus: 1e9, Init: true,
      IpcMode: 'none', CgroupnsMode: 'private', Privileged: false, AutoRemove: false,
    });
    expect(host.Tmpfs['/tmp']).toBe(`rw,nosuid,nodev,noexec,size=${8 * 1024 * 1024},mode=1777`);
    // The kernel's own bound inside the container (the wall clock without the daemon): wall + grace in CPU seconds, plus slack.
    const cpu = (host.Ulimits as Array<{ Name: string; Soft: number; Hard: number }>).find((u) => u.Name === 'cpu');
    expect(cpu?.Soft).toBe(cpuSecondsCap(limits.wallMs, limits.killGraceMs, 1));
    expect(cpu?.Soft).toBeGreaterThanOrEqual(Math.ceil((limits.wallMs + limits.killGraceMs) / 1000));
    expect(host.Binds).toBeUndefined();
    const mounts = Object.fromEntries((host.Mounts as Array<{ Target: string; Source: string; ReadOnly: boolean }>).map((m) => [m.Target, [m.Source, m.ReadOnly]]));
    expect(mounts).toEqual({
      [SANDBOX_PATHS.repo]: ['/r', true], [SANDBOX_PATHS.out]: ['/o', false], [SANDBOX_PATHS.code]: ['/c', true],
      [SANDBOX_PATHS.brokerSocket]: ['/s/broker.sock', true], [SANDBOX_PATHS.request]: ['/x/request.json', true],
    });
    expect(config).toMatchObject({
      Image: 'fusion-child:test', User: '65534:65534', WorkingDir: '/repo', NetworkDisabled: true, Tty: false, OpenStdin: false,
      Cmd: ['node', '/opt/fusion/sandbox/child-main.js'],
      Labels: { [LABELS.sandbox]: '1', [LABELS.owner]: 'me', [LABELS.taskId]: 'task/1', [LABELS.attempt]: 'candidate-1.attempt-1' },
    });
    // `HOSTNAME` without `=` unsets the variable the engine would add (the child sees exactly three).
    expect(config.Env?.sort()).toEqual(['HOME=/tmp', 'HOSTNAME', 'NODE_OPTIONS=--max-old-space-size=512', 'PATH=/usr/local/bin:/usr/bin:/bin']);
    expect(config.name).toMatch(/^fusion-task_1-candidate-1\.attempt-1-[0-9a-f]{8}$/);
  });
});
