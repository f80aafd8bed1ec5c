/**
 * The backup directory must be the daemon's alone (docs/operations.md#backups): the job runs
 * as root, deletes old backups recursively, and renames `.partial` into place there. Whoever
 * else may create or rename entries in it (or in a directory above it, without the sticky bit)
 * could plant names that sort as newer backups (rotation then prunes the real one the moment it
 * is written), or swap a name for a symlink between root's checks and its recursive delete. So,
 * as for the socket's directory (src/api/socket-group.ts), the daemon refuses such a directory
 * with the fix instead of writing the database and the signing key into it.
 */
import { lstatSync, realpathSync } from 'node:fs';
import { dirname } from 'node:path';
import { FusionError } from '../errors.js';

function refuse(message: string, path: string): never {
  throw new FusionError('invalid_config', message, { details: { field: 'FUSION_BACKUP_DIR', path } });
}

/** Throws invalid_config unless `dir` (existing) and every directory above it are safe for root to write backups in. */
export function assertPrivateBackupDir(dir: string): void {
  const uid = process.geteuid?.() ?? 0;
  const real = realpathSync(dir);
  const st = lstatSync(real);
  if (!st.isDirectory()) refuse(`FUSION_BACKUP_DIR ${dir} is not a directory`, dir);
  if (st.uid !== uid && st.uid !== 0) refuse(`FUSION_BACKUP_DIR ${dir} belongs to uid ${st.uid}, not the daemon's uid ${uid}; chown ${uid} ${real} or choose a directory the daemon owns`, dir);
  if ((st.mode & 0o022) !== 0) refuse(`FUSION_BACKUP_DIR ${dir} is writable by group or others, who could plant or swap backups there (the signing key included); chmod go-w ${real} (0700 is best) or choose another directory`, dir);
  for (let d = dirname(real); ; d = dirname(d)) {
    const s = lstatSync(d);
    // A sticky directory (/tmp) lets nobody else rename or remove the daemon's entries.
    if ((s.uid !== uid && s.uid !== 0) || ((s.mode & 0o022) !== 0 && (s.mode & 0o1000) === 0)) {
      refuse(`FUSION_BACKUP_DIR ${dir}: ${d} above it is owned by uid ${s.uid} or writable by others without the sticky bit, so someone else could swap the backup directory; choose a directory under one only root or the daemon controls`, dir);
    }
    if (d === '/') break;
  }
}
