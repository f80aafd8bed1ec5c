/**
 * Whether a data directory is the daemon's alone (docs/security.md#threat-local-users).
 *
 * Everything the daemon trusts lives there (the task database, the signing key, the lock, the
 * bundle cache), and the daemon creates and tightens it through its path. A directory another
 * account owns, or one reached through a link another account made, or one below a directory
 * another account may write in, could be swapped or filled by that account: a root daemon would
 * then chmod and write through a link to wherever it points (a planted `/tmp/fusion-data ->
 * /etc` made root chmod `/etc` 0700 and fill it), and the account could hold the lock, read or
 * replace the database. So a data directory is refused unless:
 *
 * - every link on its path was made by root or the daemon's uid;
 * - the directory itself belongs to the daemon's uid;
 * - for a root daemon, every directory above it belongs to root (or the daemon) and is writable
 *   by no one else, or is sticky like /tmp (where no one else can rename or remove its entries).
 */
import { lstatSync, realpathSync, statSync, type Stats } from 'node:fs';
import { dirname, resolve, sep } from 'node:path';
import { FusionError } from '../errors.js';

const STICKY = 0o1000;

/** Every prefix of an absolute path, shortest first: /a/b/c → /a, /a/b, /a/b/c. */
function prefixes(path: string): string[] {
  const parts = path.split(sep).filter((p) => p !== '');
  return parts.map((_, i) => `/${parts.slice(0, i + 1).join('/')}`);
}

function refuse(home: string, why: string, path: string): FusionError {
  return new FusionError('invalid_config', `data directory ${home} is not this daemon's alone: ${why}; another account could swap or fill it. Give the daemon a directory of its own (e.g. the default, or one under /var/lib) with --data or FUSION_HOME`, {
    details: { field: 'data', path },
  });
}

/** Throws invalid_config unless `home` (an existing directory) is safe for a daemon of `uid`. */
export function assertDataDirOwned(home: string, uid: number): void {
  const trusted = (st: Stats): boolean => st.uid === 0 || st.uid === uid;
  for (const prefix of prefixes(resolve(home))) {
    let st: Stats;
    try {
      st = lstatSync(prefix);
    } catch {
      continue; // a component behind a link: judged through the resolved path below
    }
    if (st.isSymbolicLink() && !trusted(st)) throw refuse(home, `${prefix} is a link made by uid ${st.uid}`, prefix);
  }
  const real = realpathSync(home);
  const own = statSync(real);
  if (own.uid !== uid) throw refuse(home, `${real} belongs to uid ${own.uid}, not the daemon's uid ${uid}`, real);
  if (uid !== 0) return;
  for (let dir = dirname(real); ; dir = dirname(dir)) {
    const st = statSync(dir);
    if (!trusted(st)) throw refuse(home, `${dir} above it belongs to uid ${st.uid}`, dir);
    if ((st.mode & 0o022) !== 0 && (st.mode & STICKY) === 0) throw refuse(home, `${dir} above it is writable by others (mode ${(st.mode & 0o7777).toString(8)}) and not sticky`, dir);
    if (dir === '/') break;
  }
}
