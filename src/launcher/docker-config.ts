/**
 * The Docker create options of one sandbox container, as data: the hardened host config, the
 * binds, labels and the child image name. Pure (no engine calls), so the exact options are
 * tested without an engine; `docker.ts` runs them.
 */
import { randomUUID } from 'node:crypto';
import type Docker from 'dockerode';
import { SANDBOX_PATHS, type SandboxSpec } from './port.js';
import { cpuSecondsCap } from './docker-deadline-keeper.js';
import type { SandboxIdentity } from './sandbox-user.js';
import { packageVersion } from '../common/package-version.js';

export const CHILD_IMAGE_LABEL = 'org.fusion.child';
/** The digest of the child code an image carries (`child-code.ts`), set by `make image`. */
export const CHILD_CODE_LABEL = 'org.fusion.child-code';
export const LABELS = { sandbox: 'org.fusion.sandbox', owner: 'org.fusion.owner', taskId: 'org.fusion.task-id', attempt: 'org.fusion.attempt', uid: 'org.fusion.uid' } as const;
const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';

/** `fusion-child:<package version>`, what `make image` builds. */
export function childImage(version: string = packageVersion()): string {
  return `fusion-child:${version}`;
}
export const CHILD_IMAGE = childImage();

/** A bind mount (the dockerode types lack `NonRecursive`, API 1.40+). */
interface BindMount extends Docker.MountSettings {
  BindOptions: { Propagation: 'rprivate'; NonRecursive?: boolean };
}

export interface ContainerInput {
  spec: SandboxSpec;
  image: string;
  identity: SandboxIdentity;
  nanoCpus: number;
  owner: string;
  requestCopy?: string;
  /**
   * The host directory bound at /out: a root daemon's capped `noexec` tmpfs (`out-mount.ts`);
   * absent, `spec.outDir` itself (a non-root daemon).
   */
  outSource?: string;
  seccompOpt: string;
  /** OCI runtime (`runsc` for the gVisor tier); absent: the engine's default (runc). */
  runtime?: string;
  /** Host tasks the runtime itself needs in the container's pids cgroup (gVisor's Sentry and gofer). */
  pidsHeadroom?: number;
}

/** The complete create options of one sandbox container. Pure, for tests. */
export function containerConfig(input: ContainerInput): Docker.ContainerCreateOptions {
  const { spec, identity } = input;
  const { limits } = spec;
  const cpuSeconds = cpuSecondsCap(limits.wallMs, limits.killGraceMs, input.nanoCpus / 1e9);
  const bind = (source: string, target: string, readOnly: boolean): BindMount => ({
    Type: 'bind', Source: source, Target: target, ReadOnly: readOnly,
    // Non-recursive: a mount below the repository never shows up (20.10 cannot make it read-only).
    BindOptions: { Propagation: 'rprivate', ...(readOnly ? { NonRecursive: true } : {}) },
  });
  const mounts: BindMount[] = [bind(spec.repoDir, SANDBOX_PATHS.repo, true), bind(input.outSource ?? spec.outDir, SANDBOX_PATHS.out, false)];
  if (spec.codeDir !== undefined) mounts.push(bind(spec.codeDir, SANDBOX_PATHS.code, true));
  if (spec.brokerSocketPath !== undefined) mounts.push(bind(spec.brokerSocketPath, SANDBOX_PATHS.brokerSocket, true));
  if (input.requestCopy !== undefined) mounts.push(bind(input.requestCopy, SANDBOX_PATHS.request, true));
  const env = { PATH: DEFAULT_PATH, ...spec.env };
  // The engine adds HOSTNAME to every container's environment; a name without `=` unsets it, so
  // the child sees exactly the variables it was given (docs/security.md#isolation-tiers).
  const unset = 'HOSTNAME' in env ? [] : ['HOSTNAME'];
  const hostConfig: Docker.HostConfig & { CgroupnsMode: string } = {
    NetworkMode: 'none',
    ReadonlyRootfs: true,
    CapDrop: ['ALL'],
    SecurityOpt: ['no-new-privileges:true', input.seccompOpt],
    PidsLimit: limits.maxProcesses + (input.pidsHeadroom ?? 0),
    Memory: limits.memoryBytes,
    MemorySwap: limits.memoryBytes,
    // Under host memory pressure the children die first, never the daemon.
    OomScoreAdj: 1000,
    NanoCpus: input.nanoCpus,
    Tmpfs: {
      [SANDBOX_PATHS.tmp]: `rw,nosuid,nodev,noexec,size=${limits.tmpfsBytes},mode=1777`,
      // Docker's writable mqueue mount would be a third writable place; hide it.
      '/dev/mqueue': 'ro,nosuid,nodev,noexec,size=4k',
    },
    Init: true,
    // A private IPC namespace without the writable /dev/shm tmpfs ('private' would mount one).
    IpcMode: 'none',
    PidMode: '',
    CgroupnsMode: 'private',
    Privileged: false,
    Mounts: mounts,
    // RLIMIT_CPU: the kernel's own bound on a busy child, never reached while the wall clock is
    // kept (see docker-deadline-keeper.ts); SIGXCPU at the soft limit, SIGKILL at the hard one.
    Ulimits: [
      { Name: 'core', Soft: 0, Hard: 0 },
      { Name: 'cpu', Soft: cpuSeconds, Hard: cpuSeconds + 5 },
      // With runtime headroom in the pids cgroup, the child's own cap is the process rlimit,
      // which gVisor's Sentry enforces per sandbox (its uid is the sandbox's alone).
      ...(input.pidsHeadroom === undefined ? [] : [{ Name: 'nproc', Soft: limits.maxProcesses, Hard: limits.maxProcesses }]),
    ],
    // Output is streamed through attach; nothing is kept on the engine's disk.
    LogConfig: { Type: 'none', Config: {} },
    AutoRemove: false,
    RestartPolicy: { Name: 'no', MaximumRetryCount: 0 },
    ...(input.runtime === undefined ? {} : { Runtime: input.runtime }),
  };
  return {
    name: `fusion-${sanitize(spec.taskId)}-${sanitize(spec.label)}-${randomUUID().slice(0, 8)}`,
    Image: input.image,
    Cmd: spec.command,
    Env: [...Object.entries(env).map(([k, v]) => `${k}=${v}`), ...unset],
    User: `${identity.uid}:${identity.gid}`,
    WorkingDir: SANDBOX_PATHS.repo,
    Hostname: 'sandbox',
    NetworkDisabled: true,
    AttachStdin: false, AttachStdout: true, AttachStderr: true, OpenStdin: false, Tty: false,
    StopSignal: 'SIGTERM',
    Labels: { [LABELS.sandbox]: '1', [LABELS.owner]: input.owner, [LABELS.taskId]: spec.taskId, [LABELS.attempt]: spec.label, [LABELS.uid]: String(identity.uid) },
    HostConfig: hostConfig,
  };
}

function sanitize(text: string): string {
  return text.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 40);
}
