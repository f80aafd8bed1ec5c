import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, lchownSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { assertDataDirOwned } from '../../../src/store/data-dir-owner.js';
import { FusionError } from '../../../src/errors.js';

// The daemon's uid is a parameter, so every case runs under any test uid: "another account"
// is simply a uid other than the one passed.
const me = process.getuid?.() ?? 0;
const other = me + 12_345;

function refusal(fn: () => void): FusionError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(FusionError);
    return err as FusionError;
  }
  throw new Error('expected a refusal');
}

describe('a data directory must be the daemon\'s alone', () => {
  let base: string;
  beforeEach(() => {
    base = mkdtempSync(join(tmpdir(), 'fusion-datadir-owner-'));
  });
  afterEach(() => rmSync(base, { recursive: true, force: true }));

  it('accepts a directory of its own', () => {
    const home = join(base, 'data');
    mkdirSync(home, { mode: 0o700 });
    expect(() => assertDataDirOwned(home, me)).not.toThrow();
  });

  it('refuses a directory another account owns, naming it', () => {
    const home = join(base, 'data');
    mkdirSync(home, { mode: 0o700 });
    const err = refusal(() => assertDataDirOwned(home, other));
    expect(err.code).toBe('invalid_config');
    expect(err.message).toContain(`belongs to uid ${me}`);
    expect(err.details).toMatchObject({ field: 'data' });
  });

  it('refuses a link another account planted at the data directory\'s name (even to a directory of the daemon\'s)', () => {
    // The planted `/tmp/fusion-data -> /etc` case: the target is the daemon's (root's) own, the link is not.
    const target = join(base, 'target');
    mkdirSync(target, { mode: 0o755 });
    const home = join(base, 'data');
    symlinkSync(target, home);
    if (me === 0) {
      // Root's own links are trusted: hand this one to another account, as a planted one would be.
      lchownSync(home, 65_534, 65_534);
      expect(refusal(() => assertDataDirOwned(home, 0)).message).toContain(`${home} is a link made by uid 65534`);
      return;
    }
    // The link is this test's uid's: refused for a daemon of any other uid, whatever the target.
    expect(refusal(() => assertDataDirOwned(home, other)).message).toContain(`${home} is a link made by uid ${me}`);
    // A link the daemon's own uid made is fine.
    expect(() => assertDataDirOwned(home, me)).not.toThrow();
  });

  it('refuses, for a root daemon, a data directory below a directory others may write in', () => {
    if (me !== 0) {
      // The ancestor rule is a root daemon's: as root every ancestor here is root's, so only the
      // mode is judged. Under another uid the ancestor `base` is not root's and the case differs.
      const home = join(base, 'data');
      mkdirSync(home, { mode: 0o700 });
      expect(refusal(() => assertDataDirOwned(home, 0)).code).toBe('invalid_config');
      return;
    }
    const open = join(base, 'open');
    mkdirSync(open);
    chmodSync(open, 0o777);
    const home = join(open, 'data');
    mkdirSync(home, { mode: 0o700 });
    const err = refusal(() => assertDataDirOwned(home, 0));
    expect(err.message).toContain(`${open} above it is writable by others (mode 777)`);
    // Sticky (like /tmp): others cannot rename or remove what is in it.
    chmodSync(open, 0o1777);
    expect(() => assertDataDirOwned(home, 0)).not.toThrow();
  });
});

// The daemon itself, as root: the planted link is refused before anything is tightened or made.
const IS_ROOT = me === 0;
const rootSuite = IS_ROOT || process.env.CI === 'true' ? describe : describe.skip;
if (!IS_ROOT && process.env.CI !== 'true') process.stderr.write('\n*** SKIPPED the daemon case of data-dir-owner.test.ts: it needs root (a link owned by another uid). ***\n\n');

rootSuite('a root daemon on a planted data directory link', () => {
  it('refuses to start and leaves the link\'s target untouched (no chmod 0700, no files)', () => {
    const base = mkdtempSync(join(tmpdir(), 'fusion-datadir-plant-'));
    try {
      const target = join(base, 'victim');
      mkdirSync(target);
      chmodSync(target, 0o755);
      const home = join(base, 'data');
      symlinkSync(target, home);
      lchownSync(home, 65_534, 65_534);
      const cli = resolve(import.meta.dirname, '..', '..', '..', 'dist', 'src', 'cli', 'main.js');
      const run = spawnSync(process.execPath, [cli, 'daemon', '--data', home, '--socket', join(base, 'd.sock'), '--sandbox', 'bwrap'], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, FUSION_LOG_LEVEL: 'silent' } });
      expect(run.status).not.toBe(0);
      expect(run.stderr).toContain(`${home} is a link made by uid 65534`);
      expect(statSync(target).mode & 0o777).toBe(0o755);
      expect(existsSync(join(target, 'fusion.db'))).toBe(false);
      expect(existsSync(join(target, 'daemon.lock'))).toBe(false);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });
});
