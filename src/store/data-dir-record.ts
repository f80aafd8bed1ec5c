/**
 * The owner record of a data directory (`daemon.json`, written by the daemon holding its lock,
 * docs/operations.md#one-daemon-per-data-directory): the owner's pid and socket.
 *
 * Apart from naming the owner in a refusal, a client given that data directory (--data,
 * FUSION_HOME) finds its daemon's socket here: a daemon started with --socket-group listens on
 * /run/fusion/fusion.sock, not in its data directory. A socket path read from a file is only
 * followed when no other account could have written it (a link, or a file another account owns or
 * may write, could point a root client at a socket of that account's choosing), and only while
 * its pid is alive (a daemon killed with SIGKILL leaves the record behind). This file holds no
 * driver import, so the CLI reads the record without loading sqlite3.
 */
import { lstatSync, readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';

export const DATA_DIR_OWNER_FILE = 'daemon.json';

export interface DataDirOwner {
  pid: number;
  socket: string;
  startedAt: string;
  /** Who holds it when not a daemon (a command that needs the data directory to itself). */
  holder?: string;
}

/** The recorded owner, if its record is readable (it is written just after the lock is taken). */
export function readDataDirOwner(home: string): DataDirOwner | null {
  try {
    const parsed = JSON.parse(readFileSync(join(home, DATA_DIR_OWNER_FILE), 'utf8')) as Partial<DataDirOwner>;
    if (typeof parsed.pid !== 'number' || typeof parsed.socket !== 'string') return null;
    return { pid: parsed.pid, socket: parsed.socket, startedAt: typeof parsed.startedAt === 'string' ? parsed.startedAt : '', ...(typeof parsed.holder === 'string' ? { holder: parsed.holder } : {}) };
  } catch {
    return null;
  }
}

/** Whether process `pid` exists (EPERM: it does, as another user, e.g. a root daemon). */
function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The socket of the live daemon that owns `home`, as its record names it, or undefined when there
 * is no trustworthy record: missing or unreadable, a link, not a regular file, owned by an account
 * other than root or `uid`, writable by group or others, held by a command rather than a daemon,
 * a relative path, or a dead pid.
 */
export function ownerSocketOf(home: string, uid: number): string | undefined {
  const file = join(home, DATA_DIR_OWNER_FILE);
  try {
    const st = lstatSync(file);
    if (!st.isFile() || (st.uid !== 0 && st.uid !== uid) || (st.mode & 0o022) !== 0) return undefined;
  } catch {
    return undefined;
  }
  const owner = readDataDirOwner(home);
  // A command holding the directory (signing-init) is no daemon: it records no socket.
  if (owner === null || owner.holder !== undefined || !isAbsolute(owner.socket) || !alive(owner.pid)) return undefined;
  return owner.socket;
}
