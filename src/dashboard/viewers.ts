/**
 * Who is looking at the dashboard, and what they may see (docs/security.md#dashboard-callers),
 * by the socket's rules: root and the daemon's uid see everything; a member of the
 * `--socket-group` sees only the tasks it submitted; any other local user is refused. On a
 * non-loopback address there is no local uid to read, so a request must carry a workspace API
 * key (as on the research TCP listener) and sees that workspace's research runs only: tasks
 * belong to uids, which a key does not name.
 */
import { execFile } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import type { DashboardScope } from './data.js';

export interface Viewer {
  scope: DashboardScope;
  /** The header's wording of who is looking and what they see. */
  label: string;
}

/** How long a uid's group list is trusted before `id -G` is asked again (a removed member loses access within this). */
export const GROUPS_TTL_MS = 10_000;

/**
 * A uid's gids (primary and supplementary) from the user database, as `id -G` reports them; [] when
 * it has no entry. The `+` makes `id` read the argument as a uid: bare digits are looked up as a
 * user name first, so a user named `1003` (LDAP directories have such names) in the socket group
 * would lend its groups to uid 1003.
 */
export function groupsOfUid(uid: number): Promise<number[]> {
  return new Promise((resolve) => {
    execFile('id', ['-G', '--', `+${uid}`], { timeout: 5_000, encoding: 'utf8' }, (err, stdout) => {
      if (err) return resolve([]);
      resolve(stdout.trim().split(/\s+/u).map(Number).filter((n) => Number.isSafeInteger(n) && n >= 0));
    });
  });
}

export class ViewerRules {
  private readonly cache = new Map<number, { groups: number[]; at: number }>();

  constructor(
    private readonly daemonUid: number,
    /** The socket group's gid, when the daemon shares its socket with one. */
    private readonly groupGid: number | undefined,
    private readonly groupsOf: (uid: number) => Promise<number[]> = groupsOfUid,
    private readonly now: () => number = Date.now,
  ) {}

  /** Root and the daemon's own uid: they see everything, and no per-user bound applies to them. */
  seesAll(uid: number): boolean {
    return uid === 0 || uid === this.daemonUid;
  }

  /** The viewer a local uid is, or undefined when it may not look at all. */
  async forUid(uid: number, name: string | undefined): Promise<Viewer | undefined> {
    const who = name === undefined ? `uid ${uid}` : `${name} (uid ${uid})`;
    if (this.seesAll(uid)) return { scope: { all: true }, label: `${who}: all tasks and runs` };
    if (this.groupGid === undefined) return undefined;
    const groups = await this.groupsFor(uid);
    if (!groups.includes(this.groupGid)) return undefined;
    return { scope: { all: false, uid }, label: `${who}: your own tasks` };
  }

  private async groupsFor(uid: number): Promise<number[]> {
    const cached = this.cache.get(uid);
    if (cached !== undefined && this.now() - cached.at < GROUPS_TTL_MS) return cached.groups;
    const groups = await this.groupsOf(uid);
    this.cache.set(uid, { groups, at: this.now() });
    if (this.cache.size > 1024) this.cache.delete(this.cache.keys().next().value!);
    return groups;
  }
}

/** uid → user name from /etc/passwd, reread when the file changes (names only label the page). */
export function passwdNames(file = '/etc/passwd'): (uid: number) => string | undefined {
  let mtimeMs = -1;
  let names = new Map<number, string>();
  return (uid) => {
    try {
      const st = statSync(file);
      if (st.mtimeMs !== mtimeMs) {
        mtimeMs = st.mtimeMs;
        names = new Map();
        for (const line of readFileSync(file, 'utf8').split('\n')) {
          const [name, , id] = line.split(':');
          if (name && id && /^\d+$/u.test(id)) names.set(Number(id), name);
        }
      }
    } catch {
      return undefined;
    }
    return names.get(uid);
  };
}
