/**
 * --socket-group's start-up checks (src/api/socket-group.ts) and who a caller is for admission
 * (src/api/routes.ts): an unknown group names the flag; a socket inside the 0700 data directory,
 * or behind a directory the group cannot traverse, is refused with the fix; a non-root caller's
 * admission key is its uid whatever header it sends.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FusionError } from '../../../src/errors.js';
import { prepareGroupSocketDir, resolveSocketGroup } from '../../../src/api/socket-group.js';
import { admissionLabel } from '../../../src/api/routes.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const scratch = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'fusion-sockgroup-'));
  dirs.push(d);
  return d;
};
const thrown = (fn: () => unknown): FusionError => {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(FusionError);
    return err as FusionError;
  }
  throw new Error('expected a throw');
};

describe('--socket-group', () => {
  it('resolves a group through NSS and refuses an unknown one naming the flag', () => {
    expect(resolveSocketGroup('root')).toEqual({ name: 'root', gid: 0 });
    expect(resolveSocketGroup('0')).toEqual({ name: 'root', gid: 0 });
    const err = thrown(() => resolveSocketGroup('no-such-group-fusion-test'));
    expect(err.code).toBe('invalid_config');
    expect(err.message).toMatch(/^--socket-group: no group "no-such-group-fusion-test" on this system/);
    expect(thrown(() => resolveSocketGroup('bad name;rm')).message).toMatch(/--socket-group: no group/);
  });

  it('refuses a socket inside the data directory (it stays 0700)', () => {
    const home = scratch();
    const err = thrown(() => prepareGroupSocketDir(join(home, 'fusion.sock'), { name: 'root', gid: 0 }, home));
    expect(err.message).toMatch(/--socket-group root: the socket .* is inside the data directory .* pass --socket in a directory of its own/);
  });

  it('creates the socket directory 0750 for the group, and refuses one behind a directory the group cannot traverse', () => {
    const base = scratch();
    chmodSync(base, 0o755);
    const gid = process.getgid!();
    prepareGroupSocketDir(join(base, 'run', 'fusion.sock'), { name: 'g', gid }, join(base, 'home'));
    expect(statSync(join(base, 'run')).mode & 0o777).toBe(0o750);
    // A 0700 directory of another group above the socket: members could never reach it.
    const closed = join(base, 'closed');
    mkdirSync(closed, { mode: 0o700 });
    const err = thrown(() => prepareGroupSocketDir(join(closed, 'run', 'fusion.sock'), { name: 'g', gid: gid + 1 }, join(base, 'home')));
    expect(err.message).toMatch(new RegExp(`members of g cannot traverse ${closed} .*chmod g\\+x`));
  });
});

describe('admission key of a socket caller', () => {
  const req = (header?: string): IncomingMessage => ({ headers: header === undefined ? {} : { 'x-fusion-caller': header } }) as unknown as IncomingMessage;
  const alice = { uid: 1234, gid: 1234, pid: 1, groups: [] };
  it('is the uid of a non-root caller, whatever X-Fusion-Caller says', () => {
    expect(admissionLabel(req('bob'), alice, false)).toBe('uid:1234');
    expect(admissionLabel(req(), alice, false)).toBe('uid:1234');
  });
  it('is the header of root or the daemon\'s uid (a proxy serving several agents)', () => {
    expect(admissionLabel(req('agent-7'), { ...alice, uid: 0 }, true)).toBe('agent-7');
    expect(admissionLabel(req(), { ...alice, uid: 0 }, true)).toBeUndefined();
  });
});

describe('--socket-group: nobody else may replace the socket or take its name', () => {
  it('refuses a socket directory writable by others, even sticky like /tmp (its name could be squatted while the daemon is down)', () => {
    const base = scratch();
    chmodSync(base, 0o755);
    const shared = join(base, 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    const err = thrown(() => prepareGroupSocketDir(join(shared, 'fusion.sock'), { name: 'g', gid: process.getgid!() }, join(base, 'home')));
    expect(err.message).toMatch(/the socket directory .*shared is writable by group or others/);
  });

  it('refuses a socket under a non-sticky directory others may write (they could swap the socket\'s directory)', () => {
    const base = scratch();
    chmodSync(base, 0o777);
    const err = thrown(() => prepareGroupSocketDir(join(base, 'run', 'fusion.sock'), { name: 'g', gid: process.getgid!() }, join(base, 'home')));
    expect(err.message).toMatch(/above the socket, is owned by uid \d+ or writable by group or others \(mode 777\)/);
  });
});
