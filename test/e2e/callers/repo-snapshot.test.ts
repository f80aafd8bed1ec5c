/**
 * A task reads only what its caller can read, through a snapshot the daemon owns
 * (docs/security.md#private-repos, docs/operations.md#repository-snapshots), end to end: a real
 * root daemon with `--socket-group`, bwrap sandboxes, the builtin engine, and real users and
 * groups made for this file (unique names, removed afterwards). The socket caller is alice, a
 * member of the group, submitting over the socket as herself (setpriv); bob is another local user
 * whose private directory holds a sentinel.
 *
 *   - swap after bind: once the candidates run (their sandboxes are bound), alice's repository
 *     path is swapped for a symlink to bob's private copy; nothing of bob's reaches the evaluator
 *     (its requests are recorded), and every citation is still checked against what alice's
 *     sandboxes read (the answer verifies). Before snapshots, the root citation check re-opened
 *     the path and quoted bob's file to the evaluator;
 *   - alice's umask-077 files (0600, hers) are read and answered from;
 *   - a 0604 root:grp file (alice is in grp: the group bits deny her) is not read, and the answer
 *     names it under "Files not read"; so is `.env` (the secrets rule); the checkout's
 *     `.gitignore` is honoured;
 *   - a restarted daemon resumes the task over the snapshot it started with, though the
 *     repository changed meanwhile; with that snapshot gone, it fails repo_snapshot_missing;
 *   - the retention prune never removes a tree a live task names.
 *
 * Needs root (useradd, setpriv) and bwrap; skips loudly elsewhere, fails under CI=true.
 */
import { describeUnless, missingPrerequisite } from '../../helpers/gates.js';
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildConfig, startDaemon, type Daemon } from '../../../src/main.js';
import { startStageScheduler, type StageWorkers } from '../../../src/workflow/stage-workers.js';
import { FusionClient } from '../../../src/client/index.js';
import type { ModelProvider } from '../../../src/models/port.js';
import { openSqliteStore } from '../../../src/store/sqlite-store.js';
import { createBundleCache } from '../../../src/bundles/bundle-cache.js';
import { pruneRepoSnapshots } from '../../../src/bundles/snapshot-retention.js';
import { DIST, FIXTURE_REPO, REFILL_ARGS, builtin, builtinRoster, captureLogs, trackingLauncher, wrapProvider, type LaunchRecord, waitFor } from '../workflow/helpers.js';
import { addTestUser, removeTestUsers } from '../../helpers/test-users.js';

const missing = missingPrerequisite({ root: true, bwrap: true, dist: true });
const suite = (name: string, body: () => void): void => describeUnless(missing, name, body);

const sh = (cmd: string, ...args: string[]): string => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/** A gate candidates wait at (abortably) before their first answer, so the test acts while their sandboxes are bound. */
function gate(): { arrived: Promise<void>; open: () => void; reset: () => void; provider: (p: ModelProvider) => ModelProvider } {
  let count = 0;
  let arrive!: () => void;
  let arrived = new Promise<void>((r) => (arrive = r));
  let release!: () => void;
  let opened = new Promise<void>((r) => (release = r));
  const self = {
    get arrived() {
      return arrived;
    },
    open: () => release(),
    reset: () => {
      count = 0;
      arrived = new Promise<void>((r) => (arrive = r));
      opened = new Promise<void>((r) => (release = r));
    },
    provider: (p: ModelProvider) => wrapProvider(p, async (req, inner) => {
      if (req.role === 'candidate') {
        if (++count === 3) arrive();
        await Promise.race([opened, new Promise((_, reject) => req.signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true }))]);
      }
      return inner.complete(req);
    }),
  };
  return self;
}

suite('a task reads only what its caller can read, through a snapshot the daemon owns', () => {
  const tag = randomBytes(3).toString('hex');
  const group = `fsnapg${tag}`;
  const privGroup = `fsnapp${tag}`;
  const alice = `fsnapa${tag}`;
  const bob = `fsnapb${tag}`;
  const SENTINEL_BOB = `BOB-PRIVATE-${randomBytes(6).toString('hex')}`;
  const SENTINEL_GRP = `GROUP-DENIED-${randomBytes(6).toString('hex')}`;
  const SENTINEL_ENV = `ENV-SECRET-${randomBytes(6).toString('hex')}`;
  const SENTINEL_IGNORED = `IGNORED-${randomBytes(6).toString('hex')}`;
  const SENTINEL_LATER = `CHANGED-LATER-${randomBytes(6).toString('hex')}`;
  let base = '';
  let home = '';
  let repo = '';
  let openRepo = '';
  let bobRepo = '';
  let socket = '';
  let aliceUid = 0;
  const evaluatorSeen: string[] = [];
  const g = gate();
  let daemon: Daemon | undefined;
  let stageWorkers: StageWorkers | undefined;
  const launches: LaunchRecord[] = [];
  const logs = captureLogs();

  const start = async (): Promise<void> => {
    const config = buildConfig({ home, socketPath: socket, socketGroup: group, logLevel: 'info', sandbox: 'bwrap', keepAttemptFiles: true });
    stageWorkers = await startStageScheduler({ jobFile: join(DIST, 'jobs', 'stage-worker.js'), log: logs.log });
    const record = (p: ModelProvider): ModelProvider => wrapProvider(p, async (req, inner) => {
      evaluatorSeen.push(JSON.stringify(req.messages));
      return inner.complete(req);
    });
    daemon = await startDaemon(config, {
      log: logs.log,
      roster: builtinRoster({
        candidates: { 1: g.provider(builtin('content-search')), 2: g.provider(builtin('path-search')), 3: g.provider(builtin('definition-search')) },
        evaluator: record(builtin('content-search')),
        merger: record(builtin('content-search')),
      }),
      launcherFactories: { bwrap: () => trackingLauncher(logs.log, launches) },
      workflow: { codeDir: DIST, stageJobFile: join(DIST, 'jobs', 'stage-worker.js'), stageWorkers, runRoot: join(base, 'run-root') },
    });
  };
  const stop = async (): Promise<void> => {
    await daemon?.close();
    await stageWorkers?.stop();
    daemon = undefined;
  };
  const root = (): FusionClient => new FusionClient(socket);

  /** A request over the socket as alice (node:http only), through setpriv with her uid and groups. */
  const asAlice = (method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> => {
    const script = `const r=require('node:http').request({socketPath:${JSON.stringify(socket)},method:${JSON.stringify(method)},path:${JSON.stringify(path)},headers:{'content-type':'application/json'}},(res)=>{let t='';res.on('data',(c)=>t+=c);res.on('end',()=>process.stdout.write(JSON.stringify({status:res.statusCode,text:t})))});r.on('error',(e)=>process.stdout.write(JSON.stringify({status:-1,text:e.code})));r.end(${JSON.stringify(body === undefined ? '' : JSON.stringify(body))});`;
    return new Promise((resolve, reject) => {
      const child = spawn('setpriv', [`--reuid=${alice}`, `--regid=${alice}`, '--init-groups', '--', process.execPath, '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr.on('data', (c: Buffer) => (err += c.toString()));
      child.once('exit', () => {
        try {
          const r = JSON.parse(out) as { status: number; text: string };
          resolve({ status: r.status, json: r.text.startsWith('{') ? JSON.parse(r.text) : r.text });
        } catch {
          reject(new Error(`request as alice failed: ${out} ${err}`));
        }
      });
    });
  };
  const waitState = async (taskId: string, states: string[], ms = 120_000): Promise<Record<string, any>> => {
    let last: Record<string, any> | undefined;
    try {
      return await waitFor(`task ${taskId} to be ${states.join('/')}`, async () => {
        last = (await root().call('GET', `/v1/tasks/${taskId}`)) as Record<string, any>;
        return states.includes(last.state as string) ? last : false;
      }, ms, 50);
    } catch (err) {
      throw new Error(`task ${taskId} is ${String(last?.state)}, not ${states.join('/')}`, { cause: err });
    }
  };

  beforeAll(async () => {
    if (missing !== undefined) throw new Error(`this suite cannot run: ${missing} (CI=true forbids skipping it)`);
    sh('groupadd', group);
    sh('groupadd', privGroup);
    sh('useradd', '--no-create-home', '--user-group', '--shell', '/usr/sbin/nologin', '--groups', `${group},${privGroup}`, alice);
    addTestUser(bob);
    aliceUid = Number(sh('id', '-u', alice).trim());
    base = mkdtempSync(join(tmpdir(), 'fusion-snapshot-'));
    chmodSync(base, 0o755);
    home = join(base, 'data');
    socket = join(base, 'sock', 'fusion.sock');

    // Alice's checkouts in her 0700 home: one as a umask-022 user keeps it (the swap target),
    // one as a umask-077 user does (every file 0600 hers).
    const aliceHome = join(base, 'alice');
    repo = join(aliceHome, 'repo');
    openRepo = join(aliceHome, 'open-repo');
    mkdirSync(aliceHome);
    cpSync(FIXTURE_REPO, openRepo, { recursive: true });
    cpSync(FIXTURE_REPO, repo, { recursive: true });
    writeFileSync(join(repo, '.env'), `TOKEN_BUCKET_REFILL_SECRET=${SENTINEL_ENV}\n`);
    writeFileSync(join(repo, '.gitignore'), 'generated/\n');
    mkdirSync(join(repo, 'generated'));
    writeFileSync(join(repo, 'generated', 'refill-tokens.js'), `// token bucket refill tokens rate ${SENTINEL_IGNORED}\n`);
    sh('chown', '-R', `${alice}:${alice}`, aliceHome);
    sh('chmod', '-R', 'u=rwX,go=', repo);
    sh('chmod', '-R', 'u=rwX,go=rX', openRepo);
    chmodSync(aliceHome, 0o700);
    // A file of root's group-restricted notes in her tree: others may read it, her group may not.
    const denied = join(repo, 'src', 'refill-notes.js');
    writeFileSync(denied, `// token bucket refill tokens: ${SENTINEL_GRP}\n`);
    sh('chown', `root:${privGroup}`, denied);
    chmodSync(denied, 0o604);

    // Bob's private copy, with his sentinel on every line of the file the candidates cite.
    const bobHome = join(base, 'bob');
    bobRepo = join(bobHome, 'repo');
    mkdirSync(bobHome);
    cpSync(FIXTURE_REPO, bobRepo, { recursive: true });
    const cited = readdirSync(join(bobRepo, 'src'));
    for (const f of cited) writeFileSync(join(bobRepo, 'src', f), Array.from({ length: 200 }, () => `const refill = '${SENTINEL_BOB}';`).join('\n'));
    sh('chown', '-R', `${bob}:${bob}`, bobHome);
    chmodSync(bobHome, 0o700);
    await start();
  }, 120_000);

  afterAll(async () => {
    g.open();
    await stop().catch(() => undefined);
    removeTestUsers([alice, bob]);
    for (const grp of [group, privGroup]) {
      try {
        sh('groupdel', grp);
      } catch {
        /* not created */
      }
    }
    if (base !== '') rmSync(base, { recursive: true, force: true });
  }, 120_000);

  /** Resolves when every candidate waits at the gate; a task that ends first is an error naming why. */
  const candidatesRunning = async (taskId: string): Promise<void> => {
    let ended = false;
    await Promise.race([
      g.arrived,
      waitState(taskId, ['completed', 'failed', 'cancelled'], 600_000).then((t) => {
        ended = true;
        throw new Error(`the task ended before its candidates ran: ${JSON.stringify(t.error)}`);
      }),
    ]);
    expect(ended).toBe(false);
  };

  it('swap after bind: once the sandboxes are bound the path is swapped for bob\'s private directory; nothing of bob\'s reaches the evaluator, and every citation still checks', async () => {
    const submitted = await asAlice('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo: openRepo });
    expect(submitted.status, JSON.stringify(submitted.json)).toBe(202);
    const taskId = submitted.json.taskId as string;
    await candidatesRunning(taskId);
    renameSync(openRepo, `${openRepo}.orig`);
    symlinkSync(bobRepo, openRepo);
    g.open();
    const task = await waitState(taskId, ['completed', 'failed']);
    rmSync(openRepo);
    renameSync(`${openRepo}.orig`, openRepo);
    expect(evaluatorSeen.join('\n')).not.toContain(SENTINEL_BOB);
    expect(task.error).toBeNull();
    expect(evaluatorSeen.length).toBeGreaterThan(0);
    const result = await asAlice('GET', `/v1/tasks/${taskId}/result`);
    const text = result.json.answer.text as string;
    expect(text).not.toContain(SENTINEL_BOB);
    expect(text).toContain('src/token-bucket.js');
    expect(text).not.toContain('## Unconfirmed citations');
    expect(text).not.toContain('## Files not read');
  }, 240_000);

  it('alice\'s umask-077 files are read and answered from; a 0604 root:grp file she cannot read and .env are left out and named; .gitignore is honoured', async () => {
    g.reset();
    evaluatorSeen.length = 0;
    const submitted = await asAlice('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo });
    expect(submitted.status, JSON.stringify(submitted.json)).toBe(202);
    const taskId = submitted.json.taskId as string;
    await candidatesRunning(taskId);
    g.open();
    const task = await waitState(taskId, ['completed', 'failed']);
    expect(task.error).toBeNull();
    const seen = evaluatorSeen.join('\n');
    for (const s of [SENTINEL_GRP, SENTINEL_ENV, SENTINEL_IGNORED]) expect(seen).not.toContain(s);
    const result = await asAlice('GET', `/v1/tasks/${taskId}/result`);
    expect(result.status).toBe(200);
    const text = result.json.answer.text as string;
    for (const s of [SENTINEL_GRP, SENTINEL_ENV, SENTINEL_IGNORED]) expect(text).not.toContain(s);
    // Her own 0600 files were read: the answer cites the token bucket, and every citation checks.
    expect(text).toContain('src/token-bucket.js');
    expect(text).not.toContain('## Unconfirmed citations');
    expect(text).toContain('## Files not read');
    expect(text).toMatch(/1 path was left out because the submitting user cannot read it:\s+- `src\/refill-notes\.js`/u);
    expect(text).toMatch(/1 path was left out by the secrets rule[^\n]*\n\s*- `\.env`/u);
    // The result says what was left out, and why.
    expect(result.json.repository).toMatchObject({ skipped: { unreadable: 1, secret: 1 }, skipped_paths: { unreadable: ['src/refill-notes.js'], secret: ['.env'] } });
    expect(result.json.repository.skipped_paths.ignored).toEqual(expect.arrayContaining(['generated/']));
    expect(result.json.nothingRead).toBe(false);
    const row = (await root().call('GET', `/v1/tasks/${taskId}`)) as Record<string, any>;
    expect(row.repo).toBe(repo);
  }, 240_000);

  it('a repository none of whose files alice can read: the task completes, and the answer and the result name every skipped file and why', async () => {
    // Her directories (she may list them), every file root's and 0600: nothing is packed, so
    // nothing can be confirmed; the answer must say why rather than only that.
    const unreadable = join(base, 'alice', 'unreadable-repo');
    cpSync(FIXTURE_REPO, unreadable, { recursive: true });
    sh('chown', '-R', `${alice}:${alice}`, unreadable);
    sh('chmod', '-R', 'u=rwX,go=', unreadable);
    const files = sh('find', unreadable, '-type', 'f').trim().split('\n').map((f) => f.slice(unreadable.length + 1)).sort();
    for (const f of files) {
      sh('chown', 'root:root', join(unreadable, f));
      chmodSync(join(unreadable, f), 0o600);
    }
    expect(files).toContain('src/token-bucket.js');
    g.reset();
    const submitted = await asAlice('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo: unreadable });
    expect(submitted.status, JSON.stringify(submitted.json)).toBe(202);
    const taskId = submitted.json.taskId as string;
    await candidatesRunning(taskId);
    g.open();
    const task = await waitState(taskId, ['completed', 'failed']);
    expect(task.error).toBeNull();
    const result = await asAlice('GET', `/v1/tasks/${taskId}/result`);
    expect(result.status).toBe(200);
    const text = result.json.answer.text as string;
    expect(text).toContain('## Files not read');
    expect(text).toContain(`${files.length} paths were left out because the submitting user cannot read them:`);
    for (const f of files.slice(0, 20)) expect(text).toContain(`- \`${f}\``);
    expect(result.json.repository).toMatchObject({ entries: expect.any(Number), files: 0, skipped: { unreadable: files.length } });
    expect(result.json.repository.skipped_paths.unreadable).toEqual(files.slice(0, 20));
    // Verified, but written from nothing: the result says so, not only the answer's last section.
    expect(result.json.nothingRead).toBe(true);
    expect(result.json.answer.header).toContain("Nothing was read: none of the repository's files could be read");
    expect((await asAlice('GET', `/v1/tasks/${taskId}/wait?timeoutMs=0`)).json).toMatchObject({ terminal: true, nothingRead: true });
  }, 240_000);

  it('a restarted daemon resumes the task over the snapshot it started with; with that snapshot gone it fails repo_snapshot_missing', async () => {
    g.reset();
    evaluatorSeen.length = 0;
    const submitted = await asAlice('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo });
    const taskId = submitted.json.taskId as string;
    await candidatesRunning(taskId);
    // Stopped mid-run (left for recovery); meanwhile the repository changes.
    await stop();
    writeFileSync(join(repo, 'src', 'token-bucket.js'), Array.from({ length: 200 }, () => `const later = '${SENTINEL_LATER}';`).join('\n'));
    sh('chown', `${alice}:${alice}`, join(repo, 'src', 'token-bucket.js'));
    const store = await openSqliteStore({ file: join(home, 'fusion.db'), log: logs.log });
    const digest = (await store.getTask(taskId))?.bundleDigest;
    await store.close();
    expect(digest).toMatch(/^[0-9a-f]{64}$/u);
    g.open();
    await start();
    const task = await waitState(taskId, ['completed', 'failed']);
    expect(task.error).toBeNull();
    expect(evaluatorSeen.join('\n')).not.toContain(SENTINEL_LATER);
    const result = (await root().call('GET', `/v1/tasks/${taskId}/result`)) as Record<string, any>;
    expect(result.answer.text as string).not.toContain(SENTINEL_LATER);
    expect(result.answer.text as string).not.toContain('## Unconfirmed citations');

    // Once more, and this time the snapshot is removed while the daemon is down.
    g.reset();
    const again = await asAlice('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo });
    const lostId = again.json.taskId as string;
    await candidatesRunning(lostId);
    await waitState(lostId, ['candidates_running']);
    await stop();
    const s2 = await openSqliteStore({ file: join(home, 'fusion.db'), log: logs.log });
    const lostDigest = (await s2.getTask(lostId))!.bundleDigest!;
    await s2.close();
    rmSync(join(home, 'bundles', lostDigest), { recursive: true, force: true });
    g.open();
    await start();
    const lost = await waitState(lostId, ['completed', 'failed']);
    expect(lost.state).toBe('failed');
    expect(lost.error.code).toBe('repo_snapshot_missing');
  }, 300_000);

  it('the retention prune removes old unreferenced trees and never one a live task names', async () => {
    g.reset();
    const submitted = await asAlice('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo });
    const taskId = submitted.json.taskId as string;
    await candidatesRunning(taskId);
    const store = await openSqliteStore({ file: join(home, 'fusion.db'), log: logs.log });
    const live = (await store.getTask(taskId))!.bundleDigest!;
    const dir = join(home, 'bundles');
    // Every tree looks a year old; the one the running task names must stay.
    const old = new Date(Date.now() - 365 * 86_400_000);
    for (const name of readdirSync(dir)) utimesSync(join(dir, name), old, old);
    const cache = await createBundleCache({ dir, maxBytes: 1024 * 1024, log: logs.log });
    const pruned = await pruneRepoSnapshots({ store, cache, olderThanDays: 30, log: logs.log });
    await store.close();
    expect(existsSync(join(dir, live))).toBe(true);
    expect(pruned.trees).toBeGreaterThan(0);
    g.open();
    const done = await waitState(taskId, ['completed', 'failed']);
    expect(done.error).toBeNull();
    expect(aliceUid).toBeGreaterThan(0);
  }, 240_000);
});
