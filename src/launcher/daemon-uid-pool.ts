/**
 * The daemon's uid pool, from its configuration (`--sandbox-uids` / FUSION_SANDBOX_UIDS): checks
 * the range against the host's users, groups and other owners' subordinate ids, and lets the pool
 * ask the engine whether a crashed holder's container still exists.
 */
import { existsSync } from 'node:fs';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import { DEFAULT_DOCKER_SOCKET, dockerContainerProbe } from './docker.js';
import { createUidPool, parseUidRange, uidRangeConflicts, type UidPool } from './uid-pool.js';

export function createDaemonUidPool(rangeText: string, isRoot: boolean, log: Logger): UidPool {
  const range = parseUidRange(rangeText);
  if (!isRoot) {
    // Without root the sandboxes run as the daemon's own uid: nothing is leased (docs/security.md#uid-model).
    log.warn({ sandboxUids: rangeText }, 'daemon is not root: every sandbox runs as the daemon\'s own uid (no per-attempt uid); a sandbox escape reaches the other attempts\' brokers and outputs');
    return createUidPool({ range });
  }
  const conflicts = uidRangeConflicts(range);
  if (conflicts.length > 0) {
    throw new FusionError('invalid_config', `sandbox uid range ${rangeText} is not free: ${conflicts.slice(0, 3).join('; ')}; choose another with --sandbox-uids START-END`, { details: { conflicts } });
  }
  return createUidPool({ range, ...(existsSync(DEFAULT_DOCKER_SOCKET) ? { containerExists: dockerContainerProbe() } : {}) });
}
