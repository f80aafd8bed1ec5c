/**
 * The packing child reads the repository as the submitting caller, so that caller can signal it:
 * it may stop it (SIGSTOP, which SIGTERM does not end) or submit many repositories at once. It
 * cannot take the child's descriptors (the child changed its credentials: not dumpable, so no
 * ptrace or pidfd_getfd). None of that may hang a submission forever or let one caller's packs
 * pile up in the daemon's memory (docs/security.md#repository-bundles).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packRepo } from '../../../src/bundles/pack-as-caller.js';
import { createPackGate } from '../../../src/bundles/pack-gate.js';
import { FusionError } from '../../../src/errors.js';
import { waitFor } from '../../helpers/wait.js';

const dirs: string[] = [];
const helpers: ChildProcess[] = [];
afterAll(() => {
  helpers.forEach((h) => h.kill('SIGKILL'));
  dirs.forEach((d) => rmSync(d, { recursive: true, force: true }));
});

const CALLER = { uid: 65534, gid: 65534, pid: 1, groups: [] };

/** A repository the caller can read, with enough files that its packing is not instant. */
function repoOf(files: number): string {
  const home = mkdtempSync(join(tmpdir(), 'fusion-pack-hostile-'));
  dirs.push(home);
  const repo = join(home, 'repo');
  mkdirSync(repo);
  for (let i = 0; i < files; i++) writeFileSync(join(repo, `f${i}`), `file ${i}\n`, { mode: 0o644 });
  execFileSync('chown', ['-R', `${CALLER.uid}:${CALLER.gid}`, home]);
  return repo;
}

/** The real uid of a process (its /proc entry belongs to root once it is not dumpable). */
function realUid(pid: string): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('Uid:'));
  return Number(line?.split(/\s+/u)[1]);
}

/** Pids of the pack children (node running pack-child.js) reading `repo`, once they are the caller. */
function packChildren(repo: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/u.test(name)) continue;
    try {
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      if (argv.some((a) => a.endsWith('pack-child.js')) && argv.includes(repo) && realUid(name) === CALLER.uid) pids.push(Number(name));
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

async function waitForChild(repo: string): Promise<number> {
  return waitFor('a pack child to appear', () => packChildren(repo)[0], 10_000, 5);
}

/**
 * Run as the caller: tries to take a copy of its pack child's stdout (pidfd_getfd: allowed on
 * one's own dumpable process; the child is not dumpable), then stops the child. Prints "held"
 * (the copy was taken) or "refused <errno>", once the child is stopped.
 */
const HOLD_AND_STOP = `
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
pidfd = libc.syscall(434, pid, 0)
fd = libc.syscall(438, pidfd, 1, 0) if pidfd >= 0 else -1
why = ctypes.get_errno()
os.kill(pid, signal.SIGSTOP)
print("held" if fd >= 0 else "refused %d" % why, flush=True)
time.sleep(60)
`;

async function holdAndStopAsCaller(pid: number): Promise<void> {
  const helper = spawn('setpriv', [`--reuid=${CALLER.uid}`, `--regid=${CALLER.gid}`, '--clear-groups', '--', '/usr/bin/python3', '-c', HOLD_AND_STOP, String(pid)], { stdio: ['ignore', 'pipe', 'inherit'] });
  helpers.push(helper);
  const line = await new Promise<string>((resolve) => helper.stdout!.once('data', (b: Buffer) => resolve(b.toString().trim())));
  // EPERM: a process that changed its credentials is not the caller's to take descriptors from.
  expect(line).toBe('refused 1');
}

const settledWithin = async <T>(p: Promise<T>, ms: number): Promise<'settled' | 'pending'> =>
  Promise.race([p.then(() => 'settled' as const, () => 'settled' as const), new Promise<'pending'>((r) => setTimeout(() => r('pending'), ms))]);

describe('a hostile caller controls its pack child', () => {
  it('a stopped child is killed at the deadline (the caller cannot take its stdout): the submit fails, it does not hang', async () => {
    const repo = repoOf(3000);
    const packing = packRepo({ repo, exclude: [], maxBytes: 64 * 1024 * 1024, caller: CALLER, timeoutMs: 1500 });
    packing.catch(() => undefined);
    const pid = await waitForChild(repo);
    // What the caller can do to the child: stop it (taking its stdout is refused).
    await holdAndStopAsCaller(pid);
    expect(await settledWithin(packing, 10_000)).toBe('settled');
    const err = await packing.catch((e: unknown) => e as FusionError);
    expect(err).toBeInstanceOf(FusionError);
    expect((err as FusionError).details).toMatchObject({ field: 'repo', reason: 'pack_timeout' });
    // The child is gone (SIGKILL reaches a stopped process; SIGTERM would not).
    await waitFor('the stopped pack child to be gone', () => packChildren(repo).length === 0, 5_000);
  }, 20_000);

  it('a stopped child is killed when the run is aborted: a cancel or a daemon stop does not wait for the deadline', async () => {
    const repo = repoOf(3000);
    const ac = new AbortController();
    const packing = packRepo({ repo, exclude: [], maxBytes: 64 * 1024 * 1024, caller: CALLER, timeoutMs: 120_000, signal: ac.signal });
    packing.catch(() => undefined);
    const pid = await waitForChild(repo);
    process.kill(pid, 'SIGSTOP');
    ac.abort('shutdown');
    expect(await settledWithin(packing, 5_000)).toBe('settled');
    const err = await packing.catch((e: unknown) => e as FusionError);
    expect(err).toBeInstanceOf(FusionError);
    expect((err as FusionError).code).toBe('cancelled');
    expect((err as FusionError).details).toMatchObject({ field: 'repo', reason: 'pack_stopped' });
    await waitFor('the stopped pack child to be gone', () => packChildren(repo).length === 0, 5_000);
  }, 20_000);

  it('packs one repository per caller at a time: a second submit waits, it does not start a second child', async () => {
    const repo = repoOf(3000);
    // The deadline counts from the call, child start-up included: long enough that a loaded
    // host still finds the first child stopped, not already killed, when it looks.
    const first = packRepo({ repo, exclude: [], maxBytes: 64 * 1024 * 1024, caller: CALLER, timeoutMs: 6000 });
    first.catch(() => undefined);
    const pid = await waitForChild(repo);
    process.kill(pid, 'SIGSTOP');
    const second = packRepo({ repo, exclude: [], maxBytes: 64 * 1024 * 1024, caller: CALLER, timeoutMs: 20_000 });
    // An absence: nothing marks "the second submit decided to wait", so this window is where a
    // second child would show (the first is stopped until its deadline, seconds away).
    await new Promise((r) => setTimeout(r, 800));
    expect(packChildren(repo)).toEqual([pid]);
    expect((await first.catch((e: unknown) => e as FusionError) as FusionError).details).toMatchObject({ reason: 'pack_timeout' });
    // Once the first is over, the second runs to the end.
    const packed = await second;
    expect(packed.entries).toBe(3000);
  }, 30_000);
});

describe('pack gate', () => {
  it('runs at most `total` at once and one per key, in arrival order among free keys', async () => {
    const gate = createPackGate(2);
    const running: string[] = [];
    const releases = new Map<string, () => void>();
    const job = (name: string, key: string): Promise<void> => gate.run(key, () => new Promise<void>((resolve) => {
      running.push(name);
      releases.set(name, () => {
        running.splice(running.indexOf(name), 1);
        resolve();
      });
    }));
    const all = [job('a1', 'a'), job('a2', 'a'), job('b1', 'b'), job('c1', 'c')];
    await Promise.resolve();
    expect(running).toEqual(['a1', 'b1']);
    releases.get('a1')!();
    await new Promise((r) => setTimeout(r, 0));
    expect(running).toEqual(['b1', 'a2']);
    releases.get('b1')!();
    await new Promise((r) => setTimeout(r, 0));
    expect(running).toEqual(['a2', 'c1']);
    releases.get('a2')!();
    releases.get('c1')!();
    await Promise.all(all);
    // A failing job frees its place too.
    await expect(gate.run('a', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await expect(gate.run('a', () => Promise.resolve(7))).resolves.toBe(7);
  });
});
