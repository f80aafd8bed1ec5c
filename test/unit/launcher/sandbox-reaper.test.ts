/**
 * The start-up reaper of a killed daemon's sandbox leftovers (src/launcher/sandbox-reaper.ts):
 * mounts found in mountinfo (even when the mount hides the directory's owner), mount points,
 * stray processes of the pool and dead uid claims go; a live holder's processes, a live process's
 * mounts and whatever a planted symbolic link names stay. Needs root (mount, setpriv); skips
 * loudly elsewhere, never under CI=true.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { hostOutOwner } from '../../../src/launcher/out-mount.js';
import { mountPoints, reapSandboxLeftovers } from '../../../src/launcher/sandbox-reaper.js';
import { createUidPool, startTime } from '../../../src/launcher/uid-pool.js';
import { waitFor } from '../../helpers/wait.js';

const IS_ROOT = process.getuid?.() === 0;
if (!IS_ROOT && process.env.CI !== 'true') process.stderr.write('\n*** SKIPPED sandbox-reaper.test.ts: it needs root (mount, setpriv). ***\n\n');
const suite = IS_ROOT || process.env.CI === 'true' ? describe : describe.skip;

// A dead pid: pid_max is at most 2^22, so this one never runs.
const DEAD = 4_194_305;
/** A range of this file's own (random), far from the default and from other test files'. */
const START = 3_100_000 + Math.floor(Math.random() * 1000) * 64;
const RANGE = { start: START, end: START + 31 };
const mounted = (dir: string): boolean => mountPoints(readFileSync('/proc/self/mountinfo', 'utf8')).includes(dir);
const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const clean of cleanups.splice(0).reverse()) {
    try {
      clean();
    } catch {
      // best effort
    }
  }
});

function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), 'fusion-reaper-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function mountTmpfs(dir: string, options = 'size=64k'): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  execFileSync('/usr/bin/mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir]);
  cleanups.push(() => execFileSync('/usr/bin/umount', ['-l', dir], { stdio: 'ignore' }));
}

function setup() {
  const root = scratch();
  const runRoot = join(root, 'run');
  const hostOutBase = join(root, 'out-mounts');
  const legacyDir = join(root, 'legacy');
  const claimDir = join(root, 'claims');
  for (const dir of [runRoot, hostOutBase, legacyDir]) mkdirSync(dir, { mode: 0o700 });
  const pool = createUidPool({ range: RANGE, claimDir });
  const reap = () => reapSandboxLeftovers({ log: silentLogger(), runRoot, pool, hostOutBase, legacyDir });
  return { root, runRoot, hostOutBase, legacyDir, claimDir, pool, reap };
}

suite('reapSandboxLeftovers', () => {
  it('unmounts what a dead daemon left (run root, host /out of a dead process, old /tmp mounts hiding their owner) and keeps a live process\'s', async () => {
    const s = setup();
    const inRunRoot = join(s.runRoot, 'attempt', 'out');
    mountTmpfs(inRunRoot);
    const deadOut = join(s.hostOutBase, `${DEAD}.123.abc`);
    mountTmpfs(deadOut);
    const liveOut = join(s.hostOutBase, `${hostOutOwner()}.def`);
    mountTmpfs(liveOut);
    // An earlier version's /tmp mount: its tmpfs root belongs to the sandbox uid and is 0700, so
    // the directory's own owner (root) is hidden by the live mount.
    const legacy = join(s.legacyDir, `fusion-tmp-${DEAD}-old`);
    mountTmpfs(legacy, `size=64k,mode=0700,uid=${RANGE.start},gid=${RANGE.start}`);
    const report = await s.reap();
    expect(report.unmounted.sort()).toEqual([inRunRoot, deadOut, legacy].sort());
    for (const dir of [inRunRoot, deadOut, legacy]) expect(mounted(dir)).toBe(false);
    expect(mounted(liveOut)).toBe(true);
    expect(existsSync(deadOut)).toBe(false);
    expect(existsSync(legacy)).toBe(false);
  });

  it('never follows a planted symbolic link to unmount the host mount it names', async () => {
    const s = setup();
    const victim = join(s.root, 'victim');
    mountTmpfs(victim);
    symlinkSync(victim, join(s.legacyDir, `fusion-tmp-${DEAD}-planted`));
    await s.reap();
    expect(mounted(victim)).toBe(true);
  });

  it('kills pool processes no live sandbox holds, releases dead claims, and leaves a held uid\'s processes alone', async () => {
    const s = setup();
    const [stray, held] = [RANGE.start + 3, RANGE.start + 4];
    // A claim of a dead daemon (still active: it never released it) and a process of its uid.
    mkdirSync(s.claimDir, { recursive: true, mode: 0o700 });
    writeFileSync(join(s.claimDir, String(stray)), JSON.stringify({ label: 't/x', paths: [], nonce: randomUUID(), pid: DEAD, started: '1', active: true }), { mode: 0o600 });
    const token = `reaper-${randomUUID().slice(0, 8)}`;
    const sleeper = (uid: number) => {
      const child = spawn('/usr/bin/setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--', '/bin/sh', '-c', 'exec sleep 600', token], { stdio: 'ignore' });
      cleanups.push(() => child.kill('SIGKILL'));
      return child;
    };
    // A claim this live process released while its sandbox was still ending: that daemon's to end.
    const ending = RANGE.start + 5;
    writeFileSync(join(s.claimDir, String(ending)), JSON.stringify({ label: 't/z', paths: [], nonce: randomUUID(), pid: process.pid, started: startTime(process.pid), active: false }), { mode: 0o600 });
    const endingChild = sleeper(ending);
    const strayChild = sleeper(stray);
    // A live holder: a claim by this very process.
    writeFileSync(join(s.claimDir, String(held)), JSON.stringify({ label: 't/y', paths: [], nonce: randomUUID(), pid: process.pid, started: startTime(process.pid), active: true }), { mode: 0o600 });
    const heldChild = sleeper(held);
    // Both have dropped to their uid before the reaper looks.
    await waitFor('the sleepers to run as their uids', () => {
      const ids = [strayChild.pid, heldChild.pid, endingChild.pid].map((pid) => readFileSync(`/proc/${pid}/status`, 'utf8').match(/^Uid:\s+(\d+)/m)?.[1]);
      return ids[0] === String(stray) && ids[1] === String(held) && ids[2] === String(ending);
    }, 10_000);
    const exited = new Promise((resolve) => strayChild.once('exit', (_code, signal) => resolve(signal)));
    const report = await s.reap();
    expect(report.killed).toContain(strayChild.pid);
    expect(report.killed).not.toContain(heldChild.pid);
    expect(report.killed).not.toContain(endingChild.pid);
    expect(endingChild.exitCode).toBeNull();
    expect(await exited).toBe('SIGKILL');
    expect(heldChild.exitCode).toBeNull();
    expect(report.releasedClaims).toEqual([stray]);
    // The released claim stands while its process lives (sweep keeps it: something of it is left).
    expect(readdirSync(s.claimDir).sort()).toEqual([String(held), String(ending)].sort());
  });
});
