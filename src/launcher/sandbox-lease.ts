/**
 * The identity one sandbox runs as: a root daemon leases a uid of its own for it from the pool
 * (`uid-pool.ts`), and hands that sandbox's `/out` and broker socket to it; a non-root daemon
 * cannot change uid, so its sandboxes run as the daemon's own uid and share it (what that loses:
 * docs/security.md#uid-model).
 */
import type { SandboxSpec } from './port.js';
import type { SandboxIdentity } from './sandbox-user.js';
import type { UidPool } from './uid-pool.js';

export interface LaunchIdentity {
  identity: SandboxIdentity;
  /** Records the container the uid runs in (checked before the uid is reused after a crash). */
  noteContainer(name: string): void;
  /** The sandbox is gone (its files may remain: the pool checks them before reuse). */
  release(): void;
}

export async function leaseIdentity(base: SandboxIdentity, pool: UidPool, spec: Pick<SandboxSpec, 'taskId' | 'label' | 'outDir' | 'brokerSocketPath'>): Promise<LaunchIdentity> {
  if (!base.dropPrivileges) return { identity: base, noteContainer: () => undefined, release: () => undefined };
  const paths = [spec.outDir, ...(spec.brokerSocketPath === undefined ? [] : [spec.brokerSocketPath])];
  const lease = await pool.lease({ label: `${spec.taskId}/${spec.label}`, paths });
  return {
    identity: { uid: lease.uid, gid: lease.gid, dropPrivileges: true },
    noteContainer: (name) => lease.update({ container: name }),
    release: () => lease.release(),
  };
}
