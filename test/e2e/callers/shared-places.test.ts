/**
 * What a root daemon creates where other local users can look (docs/security.md#threat-local-users,
 * docs/operations.md#one-daemon-per-data-directory), end to end: real daemon processes
 * (test/fixtures/e2e/workflow-daemon.mjs: real bwrap sandboxes, builtin engine, candidates that
 * wait in their model calls) and a real local user made for the test.
 *
 *   - a user who plants a symlink at the old `$TMPDIR/fsn-0-<hash>.pid` name and a directory at
 *     the old run-root name neither redirects a root write nor stops the daemon from starting;
 *     a SIGKILLed daemon's lock and run root do not block the next start;
 *   - a user who finds a running task's staging through a sandbox's /proc/<pid>/mountinfo (as an
 *     attacker would) reads neither its request (objective, prompts) nor its /out, nor lists it;
 *   - a second daemon on the same data directory (another socket) is refused, naming the first,
 *     and the first one's task completes;
 *   - a clean stop leaves nothing in $TMPDIR and no run root.
 *
 * Needs root (useradd, setpriv) and bwrap; skips loudly elsewhere, fails under CI=true.
 */
import { describeUnless, missingPrerequisite } from '../../helpers/gates.js';
import { execFileSync } from 'node:child_process';
import { runCommand, startFixtureDaemon, type FixtureDaemon, type Started } from '../../helpers/cli.js';
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { FusionClient } from '../../../src/client/index.js';
import { sha256Hex } from '../../../src/contracts/sha256.js';
import { DIST, REFILL_ARGS, ROOT, copyFixtureRepo, waitFor } from '../workflow/helpers.js';
import { addTestUser, removeTestUsers } from '../../helpers/test-users.js';

const missing = missingPrerequisite({ root: true, bwrap: true, dist: true });
const suite = (name: string, body: () => void): void => describeUnless(missing, name, body);

const sh = (cmd: string, ...args: string[]): string => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

async function spawnDaemon(home: string, delayMs: number, env: Record<string, string> = {}): Promise<FixtureDaemon> {
  const d = await startFixtureDaemon(join(ROOT, 'test', 'fixtures', 'e2e', 'workflow-daemon.mjs'), [home, '-', String(delayMs)], { env });
  procs.push(d.started);
  return d;
}

/** Stops a daemon with `signal`; its exit code (null when the signal ended it). */
async function stop(d: FixtureDaemon | Started, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  return (await ('started' in d ? d.started : d).stop(signal)).code;
}

/** Daemons of the running test, stopped after it whatever happened. */
const procs: Started[] = [];

/**
 * The attack, run as the local user: every process's mountinfo names its mounts' roots within
 * their filesystem; a sandbox's /out (or the private bind of it) gives the attempt directory,
 * found on the host through a mount of the same filesystem. Reports what it could read there.
 */
const ATTACK = `
const fs = require('node:fs');
const path = require('node:path');
const unesc = (s) => s.replace(/\\\\(\\d{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)));
const parse = (line) => { const f = line.split(' '); return { dev: f[2], root: unesc(f[3]), mp: unesc(f[4]) }; };
const mounts = (file) => { try { return fs.readFileSync(file, 'utf8').split('\\n').filter(Boolean).map(parse); } catch { return []; } };
const self = mounts('/proc/self/mountinfo');
const found = new Set();
for (const pid of fs.readdirSync('/proc').filter((n) => /^\\d+$/.test(n))) {
  for (const m of mounts('/proc/' + pid + '/mountinfo')) {
    for (const h of self) {
      if (h.dev !== m.dev || h.root !== '/') continue;
      // Any bind whose source lies in an attempt's staging directory (<task id tail>-<stage>…)
      // names it: the broker socket's directory, /out where it is a bind, the request file.
      let dir = (h.mp === '/' ? '' : h.mp) + m.root;
      while (dir !== '/' && dir !== '.' && dir !== '') {
        if (/^[0-9a-f]{12}-/.test(path.basename(dir))) { found.add(dir); break; }
        dir = path.dirname(dir);
      }
    }
  }
}
const read = (p) => { try { return 'read ' + fs.readFileSync(p).length; } catch (e) { return e.code; } };
const list = (p) => { try { return 'list ' + fs.readdirSync(p).join(','); } catch (e) { return e.code; } };
const report = {};
for (const dir of found) report[dir] = { request: read(path.join(dir, 'request.json')), listing: list(dir), runRoot: list(path.dirname(dir)), out: list(path.join(dir, 'out')) };
process.stdout.write(JSON.stringify(report));
`;

suite('what a root daemon leaves where local users look', () => {
  const tag = randomBytes(3).toString('hex');
  const user = `fsl${tag}`;
  let base = '';
  let fixture: { root: string; repo: string } | undefined;
  let symlinksWere: string | undefined;

  beforeAll(() => {
    addTestUser(user);
    base = mkdtempSync(join(tmpdir(), 'fusion-shared-'));
    chmodSync(base, 0o755);
    fixture = copyFixtureRepo();
  });
  afterEach(async () => {
    for (const p of procs.splice(0)) await stop(p, 'SIGKILL');
    if (symlinksWere !== undefined) writeFileSync('/proc/sys/fs/protected_symlinks', symlinksWere);
    symlinksWere = undefined;
  });
  afterAll(() => {
    // A daemon killed by a failed test leaves its sandboxes' /tmp mounts under our $TMPDIR.
    if (base) {
      const mounted = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map((l) => l.split(' ')[4] ?? '').filter((mp) => mp.startsWith(`${base}/`));
      for (const mp of mounted) execFileSync('umount', ['-l', mp]);
    }
    removeTestUsers([user], [user]);
    if (base) rmSync(base, { recursive: true, force: true });
    if (fixture) rmSync(fixture.root, { recursive: true, force: true });
  });

  const asUser = (argv: string[]): string => sh('setpriv', `--reuid=${user}`, `--regid=${user}`, '--clear-groups', '--', ...argv);
  const runRootOf = (home: string): string => join('/run', `fusion-${sha256Hex(home).slice(0, 12)}`);

  it('a link or directory planted at the old $TMPDIR names neither redirects a root write nor stops the start; a SIGKILLed daemon does not block the next', async () => {
    // Followed links in sticky directories are what the attack needs (the hardening is off on
    // some hosts): switched off for this test if it is on, and restored after.
    const was = readFileSync('/proc/sys/fs/protected_symlinks', 'utf8').trim();
    if (was !== '0') {
      symlinksWere = was;
      writeFileSync('/proc/sys/fs/protected_symlinks', '0');
    }
    const home = join(base, `home-plant`);
    const oldRoot = join(tmpdir(), `fsn-0-${sha256Hex(home).slice(0, 8)}`);
    const victim = join(base, 'victim');
    writeFileSync(victim, 'a root-owned file\n', { mode: 0o644 });
    asUser(['/bin/sh', '-c', 'mkdir "$1" && ln -s "$2" "$1.pid"', 'sh', oldRoot, victim]);
    try {
      expect(lstatSync(`${oldRoot}.pid`).isSymbolicLink()).toBe(true);
      const first = await spawnDaemon(home, 0);
      expect(readFileSync(victim, 'utf8')).toBe('a root-owned file\n');
      // The user's directory is neither adopted nor removed; the daemon stages under /run.
      expect(lstatSync(oldRoot).uid).not.toBe(0);
      const runRoot = lstatSync(runRootOf(home));
      expect([runRoot.isDirectory(), runRoot.uid, runRoot.mode & 0o777]).toEqual([true, 0, 0o711]);

      // Killed without a chance to clean up: its lock and run root must not stop the next start.
      await stop(first, 'SIGKILL');
      expect(existsSync(runRootOf(home))).toBe(true);
      const second = await spawnDaemon(home, 0);
      expect(readFileSync(victim, 'utf8')).toBe('a root-owned file\n');
      const exit = await second.started.stop();
      expect({ code: exit.code, signal: exit.signal, stderr: second.stderr() }).toMatchObject({ code: 0, signal: null });
      expect(existsSync(runRootOf(home))).toBe(false);
    } finally {
      rmSync(`${oldRoot}.pid`, { force: true });
      rmSync(oldRoot, { recursive: true, force: true });
    }
  });

  it('a running task\'s staging found through mountinfo is unreadable to a local user; a second daemon on its data directory is refused and the task completes; a clean stop leaves nothing in $TMPDIR', async () => {
    const home = join(base, 'home-run');
    // The daemon's own $TMPDIR, sticky and world-writable like /tmp, so "nothing left" is exact.
    const tmp = join(base, 'tmp');
    mkdirSync(tmp);
    chmodSync(tmp, 0o1777);
    const attack = join(base, 'attack.cjs');
    writeFileSync(attack, ATTACK, { mode: 0o644 });
    const env = { TMPDIR: tmp };
    const first = await spawnDaemon(home, 2_000, env);
    const client = new FusionClient(first.socket);
    const { taskId } = (await client.call('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo: fixture!.repo })) as { taskId: string };
    await waitFor('three candidates inside a model call', () => first.lines().filter((l) => l.startsWith(`ENTER ${taskId} `)).length === 3, 60_000);

    const report = JSON.parse(asUser([process.execPath, attack])) as Record<string, { request: string; listing: string; runRoot: string; out: string }>;
    // This task's attempts (other tests on the host may be running sandboxes of their own).
    const dirs = Object.keys(report).filter((dir) => basename(dir).startsWith(`${taskId.slice(-12)}-`));
    // The attack finds the staging (the test would prove nothing otherwise) ...
    expect(dirs.length).toBeGreaterThanOrEqual(1);
    // ... a candidate's among them, whose request (objective and prompts) root reads there ...
    const candidates = dirs.filter((dir) => /-candidate-\d\.attempt-\d+$/.test(dir));
    expect(candidates.length).toBeGreaterThanOrEqual(1);
    for (const dir of candidates) expect(readFileSync(join(dir, 'request.json'), 'utf8')).toContain(REFILL_ARGS.objective.slice(0, 30));
    for (const dir of dirs) {
      // ... and the local user reads and lists nothing.
      expect({ dir, ...report[dir] }).toEqual({ dir, request: 'EACCES', listing: 'EACCES', runRoot: 'EACCES', out: 'EACCES' });
      expect(dir.startsWith(`${runRootOf(home)}/`)).toBe(true);
    }

    // A second daemon on the same data directory, on another socket, through the real CLI.
    const other = join(base, 'other.sock');
    const second = await runCommand(process.execPath, [join(DIST, 'src', 'cli', 'main.js'), 'daemon', '--data', home, '--socket', other, '--sandbox', 'bwrap'], { env: { PATH: process.env.PATH ?? '', TMPDIR: tmp, FUSION_LOG_LEVEL: 'warn' }, cleanEnv: true, timeoutMs: 30_000 });
    expect(second.timedOut).toBe(false);
    expect(second.code).not.toBe(0);
    expect(second.stderr).toContain(`data directory ${home} is in use by the fusion daemon pid ${first.pid} (socket ${first.socket}`);
    expect(existsSync(other)).toBe(false);

    const waited = (await client.call('GET', `/v1/tasks/${taskId}/wait?timeoutMs=240000`)) as { terminal: boolean; task: { state: string } };
    expect(waited).toMatchObject({ terminal: true, task: { state: 'completed' } });

    expect(await stop(first)).toBe(0);
    expect(readdirSync(tmp)).toEqual([]);
    expect(existsSync(runRootOf(home))).toBe(false);
    expect(existsSync(join(home, 'daemon.json'))).toBe(false);
  });
});
