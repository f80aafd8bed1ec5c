/** The viewer rules: the socket's (root and the daemon's uid all; group members their own; others none). */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { addTestUser, removeTestUsers } from '../../helpers/test-users.js';
import { GROUPS_TTL_MS, groupsOfUid, passwdNames, ViewerRules } from '../../../src/dashboard/viewers.js';

describe('ViewerRules', () => {
  it('root and the daemon uid see all; a member its own; a non-member and anyone without a group are refused', async () => {
    const rules = new ViewerRules(4242, 5000, async (uid) => (uid === 1001 ? [1001, 5000] : [uid]));
    expect((await rules.forUid(0, 'root'))?.scope).toEqual({ all: true });
    expect((await rules.forUid(4242, undefined))?.scope).toEqual({ all: true });
    expect((await rules.forUid(1001, 'alice'))?.scope).toEqual({ all: false, uid: 1001 });
    expect(await rules.forUid(1002, 'bob')).toBeUndefined();
    const noGroup = new ViewerRules(4242, undefined, async () => [5000]);
    expect(await noGroup.forUid(1001, 'alice')).toBeUndefined();
  });
  it('asks for a uid\'s groups again once the cached answer is older than the TTL (a removed member loses access)', async () => {
    let now = 0;
    let groups = [1001, 5000];
    let asked = 0;
    const rules = new ViewerRules(4242, 5000, async () => {
      asked += 1;
      return groups;
    }, () => now);
    expect(await rules.forUid(1001, undefined)).toBeDefined();
    groups = [1001];
    now = GROUPS_TTL_MS - 1;
    expect(await rules.forUid(1001, undefined)).toBeDefined();
    now = GROUPS_TTL_MS;
    expect(await rules.forUid(1001, undefined)).toBeUndefined();
    expect(asked).toBe(2);
  });
  it('reads real group lists and user names on this host', async () => {
    expect(await groupsOfUid(process.getuid!())).toContain(process.getgid!());
    expect(await groupsOfUid(2_147_000_000)).toEqual([]);
    expect(passwdNames()(0)).toBe('root');
    expect(passwdNames('/nonexistent')(0)).toBeUndefined();
  });
  it.runIf(process.getuid?.() === 0)("a user named like another's uid lends it no groups (as root)", async () => {
    // An outsider, and a user whose *name* is the outsider's uid, in a group the outsider is not in.
    const tag = randomBytes(3).toString('hex');
    const outsider = `dvo${tag}`;
    const group = `dvg${tag}`;
    let numeric = '';
    try {
      execFileSync('groupadd', [group]);
      addTestUser(outsider);
      const uid = Number(execFileSync('id', ['-u', '--', outsider], { encoding: 'utf8' }).trim());
      const gid = Number(execFileSync('getent', ['group', group], { encoding: 'utf8' }).split(':')[2]);
      // useradd refuses all-digit names unless told otherwise; a directory service does not.
      execFileSync('useradd', ['--badname', '--no-create-home', '--user-group', '--shell', '/usr/sbin/nologin', '--groups', group, String(uid)]);
      numeric = String(uid);
      expect(await groupsOfUid(uid)).not.toContain(gid);
      expect(await new ViewerRules(4242, gid).forUid(uid, outsider)).toBeUndefined();
    } finally {
      removeTestUsers([numeric, outsider], [numeric, outsider, group]);
    }
  });
});
