import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { claimRunRoot, collectOutputs, createStaging, prepareRunRoot, writeRequestFile, ROOT_RUN_PARENT } from '../../../src/launcher/attempt-dirs.js';
import { sha256Hex } from '../../../src/contracts/sha256.js';

function dirs(): { out: string; dest: string; root: string } {
  const root = mkdtempSync(join(tmpdir(), 'fusion-staging-'));
  const out = join(root, 'out');
  mkdirSync(out);
  return { out, dest: join(root, 'dest'), root };
}

describe('collectOutputs (security review: never follow what a child left in /out)', () => {
  it('copies regular files as 0600 and skips symlinks, FIFOs and directories', () => {
    const { out, dest, root } = dirs();
    writeFileSync(join(out, 'answer.md'), 'hello\n');
    chmodSync(join(out, 'answer.md'), 0o4755);
    writeFileSync(join(root, 'host-secret'), 'secret\n');
    symlinkSync(join(root, 'host-secret'), join(out, 'link.md'));
    execFileSync('mkfifo', [join(out, 'pipe')]);
    mkdirSync(join(out, 'sub'));
    const r = collectOutputs(out, dest, 1024);
    expect(r.files).toEqual(['answer.md']);
    expect(r.skipped.sort()).toEqual(['link.md', 'pipe', 'sub']);
    expect(readFileSync(join(dest, 'answer.md'), 'utf8')).toBe('hello\n');
    expect(statSync(join(dest, 'answer.md')).mode & 0o7777).toBe(0o600);
    expect(existsSync(join(dest, 'link.md'))).toBe(false);
  });

  it('skips names that could not be a plain ustar member of the task tarball (long, non-ASCII, control characters)', () => {
    const { out, dest } = dirs();
    const long = 'a'.repeat(150);
    const wide = 'é'.repeat(20);
    const escape = 'x\u001b[2Ky';
    for (const name of ['answer.md', 'candidate-1.attempt-1.tool-calls.jsonl.seal.json', long, wide, escape, '.hidden']) writeFileSync(join(out, name), 'x');
    const r = collectOutputs(out, dest, 1 << 20);
    expect(r.files.sort()).toEqual(['answer.md', 'candidate-1.attempt-1.tool-calls.jsonl.seal.json']);
    expect(r.skipped.sort()).toEqual([long, wide, escape, '.hidden'].sort());
    expect(existsSync(join(dest, long))).toBe(false);
  });

  it('stops at the byte cap', () => {
    const { out, dest } = dirs();
    writeFileSync(join(out, 'a'), Buffer.alloc(600));
    writeFileSync(join(out, 'b'), Buffer.alloc(600));
    expect(collectOutputs(out, dest, 1000)).toEqual({ files: ['a'], skipped: ['b'] });
  });
});

describe('prepareRunRoot', () => {
  it('replaces a leftover of its own and creates the root 0711', () => {
    const root = join(mkdtempSync(join(tmpdir(), 'fusion-runroot-')), 'run');
    mkdirSync(root);
    writeFileSync(join(root, 'stale'), 'x');
    prepareRunRoot(root);
    expect(statSync(root).mode & 0o777).toBe(0o711);
    expect(existsSync(join(root, 'stale'))).toBe(false);
  });

  it('refuses a symlink planted at its name', () => {
    const base = mkdtempSync(join(tmpdir(), 'fusion-runroot-'));
    mkdirSync(join(base, 'elsewhere'));
    symlinkSync(join(base, 'elsewhere'), join(base, 'run'));
    expect(() => prepareRunRoot(join(base, 'run'))).toThrow(/is not a directory owned by this daemon/);
  });
});

describe('writeRequestFile', () => {
  it('writes the request 0400 (root\'s alone: the sandbox gets it through a descriptor or a copy) and never through a planted link', () => {
    const root = mkdtempSync(join(tmpdir(), 'fusion-runroot-'));
    const staging = createStaging(root, 'x-candidate-1.attempt-1', null);
    writeRequestFile(staging, { objective: 'secret objective' });
    expect(statSync(staging.requestFile).mode & 0o777).toBe(0o400);
    expect(JSON.parse(readFileSync(staging.requestFile, 'utf8'))).toEqual({ objective: 'secret objective' });
    // A second write (or a link someone left at the name) is refused, not followed.
    const target = join(root, 'target');
    writeFileSync(target, 'untouched');
    rmSync(staging.requestFile);
    symlinkSync(target, staging.requestFile);
    expect(() => writeRequestFile(staging, {})).toThrow(/EEXIST/);
    expect(readFileSync(target, 'utf8')).toBe('untouched');
    rmSync(root, { recursive: true, force: true });
  });
});

const IS_ROOT = process.getuid?.() === 0;
(IS_ROOT ? describe : describe.skip)('claimRunRoot (root daemon)', () => {
  it('stages under /run (root-only names), removes its own leftovers and an older build\'s $TMPDIR root, and never follows a link there', () => {
    const home = mkdtempSync(join(tmpdir(), 'fusion-runroot-home-'));
    const legacy = join(tmpdir(), `fsn-0-${sha256Hex(home).slice(0, 8)}`);
    mkdirSync(legacy);
    writeFileSync(join(legacy, 'left'), 'x');
    // A link at the old pid file's name (as a local user could plant): neither followed nor removed as a file.
    const victim = join(home, 'victim');
    writeFileSync(victim, 'root file');
    symlinkSync(victim, `${legacy}.pid`);
    const first = claimRunRoot(home);
    try {
      expect(first.path).toBe(join(ROOT_RUN_PARENT, `fusion-${sha256Hex(home).slice(0, 12)}`));
      expect(first.path.startsWith(`${tmpdir()}/`)).toBe(false);
      const st = lstatSync(first.path);
      expect([st.isDirectory(), st.uid, st.mode & 0o777]).toEqual([true, 0, 0o711]);
      expect(existsSync(legacy)).toBe(false);
      expect(readFileSync(victim, 'utf8')).toBe('root file');
      mkdirSync(join(first.path, 'dead-attempt'));
      // Another data directory's run root: removed once that directory is gone, kept while it exists.
      const gone = join(ROOT_RUN_PARENT, `fusion-${randomBytes(6).toString('hex')}`);
      const kept = join(ROOT_RUN_PARENT, `fusion-${randomBytes(6).toString('hex')}`);
      mkdirSync(gone);
      writeFileSync(join(gone, '.home'), join(home, 'no-such-home'));
      mkdirSync(kept);
      writeFileSync(join(kept, '.home'), home);
      const second = claimRunRoot(home);
      expect(existsSync(gone)).toBe(false);
      expect(existsSync(kept)).toBe(true);
      rmSync(kept, { recursive: true, force: true });
      expect(second.path).toBe(first.path);
      expect(existsSync(join(first.path, 'dead-attempt'))).toBe(false);
      second.remove();
      expect(existsSync(first.path)).toBe(false);
    } finally {
      first.remove();
      rmSync(`${legacy}.pid`, { force: true });
      rmSync(home, { recursive: true, force: true });
    }
  });
});
