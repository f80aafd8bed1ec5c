/**
 * The one way a test makes local users and groups (root only) and removes them: users without a
 * home or a login shell, each in a group of its own plus the groups given. Removing is best effort
 * (a user or group that was never created is fine), so an afterAll can call it whatever failed.
 */
import { execFileSync } from 'node:child_process';

const run = (cmd: string, ...args: string[]): void => {
  execFileSync(cmd, args, { stdio: 'pipe' });
};

/** Creates `name` (no home, nologin), a member of its own group and of `groups`. */
export function addTestUser(name: string, groups: readonly string[] = []): void {
  run('useradd', '--no-create-home', '--user-group', '--shell', '/usr/sbin/nologin', ...(groups.length > 0 ? ['--groups', groups.join(',')] : []), name);
}

/** Removes the users, then the groups; whatever was not created is skipped. */
export function removeTestUsers(users: readonly string[], groups: readonly string[] = []): void {
  for (const [cmd, names] of [['userdel', users], ['groupdel', groups]] as const) {
    for (const name of names) {
      if (name === '') continue;
      try {
        run(cmd, name);
      } catch {
        // not created (or already gone)
      }
    }
  }
}
