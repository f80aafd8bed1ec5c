/**
 * The repository check as the caller (docs/security.md#socket-callers), run for real: setpriv
 * as uid 65534 (nobody) over directories made for the test. Needs root (setpriv --reuid);
 * skips loudly elsewhere, fails under CI=true.
 */
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkRepoAsCaller } from '../../../src/tasks/repo-access.js';

const IS_ROOT = process.getuid?.() === 0;
const IN_CI = process.env.CI === 'true';
const suite = IS_ROOT || IN_CI ? describe : describe.skip;
if (!IS_ROOT && !IN_CI) process.stderr.write('\n*** SKIPPED test/unit/tasks/repo-access.test.ts: it needs root (setpriv --reuid). ***\n\n');

const NOBODY = { uid: 65534, gid: 65534, pid: 1, groups: [] as number[] };

suite('checkRepoAsCaller', () => {
  let base = '';
  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'fusion-repo-access-'));
    chmodSync(base, 0o755);
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it('resolves a readable directory to its physical path, following the caller\'s symlinks', async () => {
    const open = join(base, 'open');
    mkdirSync(open, { mode: 0o755 });
    symlinkSync(open, join(base, 'open-link'));
    await expect(checkRepoAsCaller(join(base, 'open-link'), NOBODY)).resolves.toBe(open);
  });

  it('refuses a directory the caller cannot read', async () => {
    const closed = join(base, 'closed');
    mkdirSync(closed, { mode: 0o700 });
    await expect(checkRepoAsCaller(closed, NOBODY)).rejects.toMatchObject({ code: 'invalid_input', details: { field: 'repo', reason: 'not_readable_by_caller' } });
  });

  // The hole: the caller's own "secret " (trailing whitespace) was checked, and "secret" (root's)
  // recorded, because the helper's output was trimmed.
  it.each([['a space', ' '], ['a newline', '\n'], ['a no-break space', '\u00a0']])('never records another directory than the one checked (name ending in %s)', async (_what, tail) => {
    const secret = join(base, `secret-${tail.codePointAt(0)}`);
    mkdirSync(secret, { mode: 0o700 });
    const decoy = `${secret}${tail}`;
    mkdirSync(decoy, { mode: 0o755 });
    chownSync(decoy, NOBODY.uid, NOBODY.gid);
    const link = join(base, `link-${tail.codePointAt(0)}`);
    symlinkSync(decoy, link);
    const outcome = await checkRepoAsCaller(link, NOBODY).then((p) => ({ path: p }), (err: { code?: string }) => ({ code: err.code }));
    expect(outcome).not.toEqual({ path: secret });
    expect(outcome).toEqual({ code: 'invalid_input' });
  });
});
