/**
 * The dashboard in a real browser: headless Chromium from Debian's package (/usr/bin/chromium)
 * driven by playwright-core, against a real daemon (in-process, real bwrap sandboxes, the builtin
 * engine) serving `--dashboard 127.0.0.1:0` with a `--socket-group`:
 * - every page renders (and, with FUSION_SCREENSHOTS_DIR set, is photographed: `make screenshots`
 *   writes docs/dashboard/);
 * - a running task's timeline moves without a reload (its candidates are held by a test gate,
 *   then released);
 * - a member of the socket group, browsing as its own uid, sees only its own tasks and cannot
 *   fetch another's page or tarball; a local user outside the group is refused;
 * - script payloads in a task's objective and in a crawled page's text never execute: no global
 *   set, no title changed, no CSP violation reported (which would mean markup got through and
 *   only the CSP stopped it).
 * Browsers of other users run as those users (setpriv wrapper as the executable, a profile they
 * own), so the dashboard reads their uid from /proc exactly as it would for a person.
 * Needs root (useradd, setpriv), bwrap, dist/ and chromium; skips loudly elsewhere, fails under CI=true.
 */
import { execFileSync, execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request } from 'node:http';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { buildConfig, startDaemon, type Daemon } from '../../../src/main.js';
import { startStageScheduler, type StageWorkers } from '../../../src/workflow/stage-workers.js';
import { FusionClient } from '../../../src/client/index.js';
import type { BuiltinStrategy } from '../../../src/models/builtin/index.js';
import type { ModelProvider } from '../../../src/models/port.js';
import { describeUnless, missingPrerequisite } from '../../helpers/gates.js';
import { waitFor } from '../../helpers/wait.js';
import { builtin, builtinRoster, captureLogs, copyFixtureRepo, DIST, freshRunRoot, trackingLauncher, wrapProvider, REFILL_ARGS, type LaunchRecord } from '../workflow/helpers.js';
import { IP_A, startSite, type Site } from '../../integration/research-crawl/site.js';
import { createKey } from '../../integration/research/helpers.js';
import { addTestUser, removeTestUsers } from '../../helpers/test-users.js';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = process.env.FUSION_SCREENSHOTS_DIR;
const HOLD = 'HOLD-THIS-TASK';
/** Each payload, if it ran, would set window.__pwned or the title. */
const PAYLOADS = [
  `<script>window.__pwned=1;document.title='pwned'</script>`,
  `<img src=x onerror="window.__pwned=2">`,
  `</pre><script>window.__pwned=3</script>`,
  `"><svg onload="window.__pwned=4">`,
];
const HOSTILE = PAYLOADS.join(' ');

const missing = missingPrerequisite({ root: true, bwrap: true, dist: true }) ?? (existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is missing (apt-get install chromium; scripts/setup-system.sh installs it)`);

function sh(cmd: string, ...args: string[]): string {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

describeUnless(missing, 'the dashboard in a real browser', () => {
  const tag = randomBytes(3).toString('hex');
  const group = `fdg${tag}`;
  const alice = `fda${tag}`;
  const carol = `fdc${tag}`;
  let base = '';
  let fixtureRoot = '';
  let repo = '';
  let runRoot = '';
  let daemon: Daemon | undefined;
  let stageWorkers: StageWorkers | undefined;
  let client: FusionClient;
  let site: Site | undefined;
  let origin = '';
  let rootBrowser: Browser | undefined;
  const contexts: BrowserContext[] = [];
  let release: () => void = () => undefined;
  const gate = new Promise<void>((r) => (release = r));
  const launches: LaunchRecord[] = [];

  /** A candidate that waits for the gate when the task's request carries HOLD (abortably), then acts as the builtin. */
  const heldCandidate = (strategy: BuiltinStrategy): ModelProvider => wrapProvider(builtin(strategy), async (req, inner) => {
    if (req.role === 'candidate' && JSON.stringify(req.messages).includes(HOLD)) {
      await new Promise<void>((resolve, reject) => {
        void gate.then(resolve);
        req.signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
      });
    }
    return inner.complete(req);
  });

  /** A browser context running Chromium as `user` (setpriv wrapper, a profile the user owns). */
  async function browserAs(user: string): Promise<BrowserContext> {
    const dir = join(base, `browser-${user}`);
    mkdirSync(join(dir, 'profile'), { recursive: true });
    const wrapper = join(dir, 'chromium.sh');
    writeFileSync(wrapper, `#!/bin/sh\nexec setpriv --reuid=${user} --regid=${user} --init-groups -- ${CHROMIUM} "$@"\n`, { mode: 0o755 });
    sh('chown', '-R', `${user}:${user}`, join(dir, 'profile'));
    chmodSync(dir, 0o755);
    const ctx = await chromium.launchPersistentContext(join(dir, 'profile'), {
      executablePath: wrapper,
      headless: true,
      args: ['--no-sandbox'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: join(dir, 'profile') },
    });
    contexts.push(ctx);
    return ctx;
  }

  /** Runs a bare HTTP request over the daemon's socket as `user` (node:http only). */
  function socketCallAs(user: string, method: string, path: string, body: unknown): Promise<{ status: number; text: string }> {
    const socketPath = daemon!.socketPath;
    const script = `const r=require('node:http').request({socketPath:${JSON.stringify(socketPath)},method:${JSON.stringify(method)},path:${JSON.stringify(path)},headers:{'content-type':'application/json'}},(res)=>{let t='';res.on('data',(c)=>t+=c);res.on('end',()=>process.stdout.write(JSON.stringify({status:res.statusCode,text:t})))});r.on('error',(e)=>process.stdout.write(JSON.stringify({status:-1,text:e.code})));r.end(${JSON.stringify(JSON.stringify(body))});`;
    return new Promise((resolve, reject) => {
      execFile('setpriv', [`--reuid=${user}`, `--regid=${user}`, '--init-groups', '--', process.execPath, '-e', script], { encoding: 'utf8', cwd: '/' }, (err, stdout) => (err ? reject(err) : resolve(JSON.parse(stdout) as { status: number; text: string })));
    });
  }

  /** A request over the daemon's socket as this (root) process, with headers the client library does not send. */
  function rootSocketCall(method: string, path: string, body: unknown, headers: Record<string, string>): Promise<{ status: number; text: string }> {
    return new Promise((resolve, reject) => {
      const req = request({ socketPath: daemon!.socketPath, method, path, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      req.on('error', reject);
      req.end(JSON.stringify(body));
    });
  }

  async function shoot(page: Page, name: string): Promise<void> {
    if (SHOTS === undefined || SHOTS === '') return;
    mkdirSync(SHOTS, { recursive: true });
    await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  }

  /** A page that records console CSP reports and script errors. */
  async function watchedPage(ctx: BrowserContext | Browser): Promise<{ page: Page; reports: string[] }> {
    const page = await ctx.newPage();
    await page.setViewportSize({ width: 1280, height: 900 });
    const reports: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy|Refused to/iu.test(m.text())) reports.push(m.text());
    });
    page.on('pageerror', (e) => reports.push(`pageerror: ${e.message}`));
    return { page, reports };
  }

  const submit = async (objective: string): Promise<string> =>
    ((await client.call('POST', '/v1/tasks/investigate', { arguments: { ...REFILL_ARGS, objective }, repo })) as { taskId: string }).taskId;

  beforeAll(async () => {
    sh('groupadd', group);
    addTestUser(alice, [group]);
    addTestUser(carol);
    base = mkdtempSync(join(tmpdir(), 'fusion-dash-'));
    chmodSync(base, 0o755);
    const fixture = copyFixtureRepo();
    fixtureRoot = fixture.root;
    repo = fixture.repo;
    runRoot = freshRunRoot();
    site = await startSite('a.test', IP_A);
    site.pages.set('/hostile.txt', { type: 'text/plain; charset=utf-8', body: `Token buckets refill at a fixed rate.\n${HOSTILE}\nThe end.\n` });
    const logs = captureLogs();
    stageWorkers = await startStageScheduler({ jobFile: join(DIST, 'jobs', 'stage-worker.js'), log: logs.log });
    const config = buildConfig({
      home: join(base, 'home'), socketPath: join(base, 'run', 'fusion.sock'), socketGroup: group, dashboard: '127.0.0.1:0', logLevel: 'info', sandbox: 'bwrap', taskConcurrency: 3,
      egressResolve: [`a.test:${IP_A}`], egressAllowCidrs: [`${IP_A}/32`],
    });
    daemon = await startDaemon(config, {
      log: logs.log,
      roster: builtinRoster({ candidates: { 1: heldCandidate('content-search'), 2: heldCandidate('path-search'), 3: heldCandidate('definition-search') } }),
      launcherFactories: { bwrap: () => trackingLauncher(logs.log, launches) },
      workflow: { codeDir: DIST, stageJobFile: join(DIST, 'jobs', 'stage-worker.js'), stageWorkers, runRoot },
    });
    client = new FusionClient(daemon.socketPath);
    origin = daemon.dashboard!.url;
    rootBrowser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  }, 120_000);

  afterAll(async () => {
    release();
    for (const ctx of contexts) await ctx.close().catch(() => undefined);
    await rootBrowser?.close().catch(() => undefined);
    await daemon?.close();
    await stageWorkers?.stop();
    await site?.origin.close();
    removeTestUsers([alice, carol], [group]);
    for (const dir of [base, fixtureRoot, runRoot]) if (dir !== '') rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  let hostileTask = '';
  let heldTask = '';
  let runId = '';
  let aliceTask = '';

  it('renders every page; hostile objective and page text stay text and never execute', async () => {
    hostileTask = await submit(`Where do tokens refill? ${HOSTILE}`);
    heldTask = await submit(`Find the token bucket refill (${HOLD})`);
    // Alice's own task, submitted as her uid over the group socket.
    const mine = await socketCallAs(alice, 'POST', '/v1/tasks/investigate', { arguments: { ...REFILL_ARGS, objective: 'Alice asks where the refill happens' }, repo });
    expect(mine.status).toBe(202);
    aliceTask = (JSON.parse(mine.text) as { taskId: string }).taskId;
    // Cancelled at once (sealed, with its tarball): her task need not compete for the two cores CI has.
    await client.call('POST', `/v1/tasks/${aliceTask}/cancel`);
    const key = await createKey(daemon!.researchDbFile, 'ws_dash');
    const created = await rootSocketCall('POST', '/api/v1/research', { query: 'token bucket refill', sourceUrls: [site!.url('/hostile.txt')], limits: { maxDepth: 0 } }, { authorization: `Bearer ${key}`, 'idempotency-key': `dash-${tag}` });
    expect(created.status).toBe(202);
    runId = (JSON.parse(created.text) as { run: { id: string } }).run.id;
    await waitFor('the hostile task to complete', async () => (await daemon!.tasks.get(hostileTask)).state === 'completed', 100_000, 200);
    await waitFor('the research run to succeed', async () => (await daemon!.research.store.getRun(runId))?.status === 'succeeded', 30_000, 100);

    const { page, reports } = await watchedPage(rootBrowser!);
    await page.goto(`${origin}/`);
    expect(await page.locator('h1').innerText()).toBe('Overview');
    expect(await page.locator('header .viewer').innerText()).toContain('all tasks');
    await shoot(page, 'overview');

    await page.goto(`${origin}/tasks`);
    expect(await page.locator('table.tasks tbody tr').count()).toBeGreaterThanOrEqual(2);
    await shoot(page, 'tasks');

    await page.goto(`${origin}/tasks/${hostileTask}`);
    expect(await page.locator('#task-state').innerText()).toBe('completed');
    expect(await page.locator('p.objective').innerText()).toContain(PAYLOADS[0]!);
    expect(await page.locator('tr.attempt[data-stage="merger"]').count()).toBe(1);
    expect(await page.locator('pre.untrusted').count()).toBe(1);
    expect(await page.locator('.audit .verdict').innerText()).toBe('verified');
    await shoot(page, 'task');
    // The export link answers the sealed tarball.
    const tar = await page.request.get(`${origin}/tasks/${hostileTask}/audit.tar`);
    expect(tar.status()).toBe(200);
    expect((await tar.body()).length).toBe((await daemon!.store.getTaskTarball(hostileTask))!.bytes);

    await page.goto(`${origin}/research`);
    expect(await page.locator(`a[href="/research/${runId}"]`).count()).toBe(1);
    await page.goto(`${origin}/research/${runId}`);
    await page.locator('details.snapshot summary').first().click();
    const snapshotText = await page.locator('details.snapshot pre.untrusted').innerText();
    expect(snapshotText).toContain(PAYLOADS[2]!);
    expect(await page.locator('section pre.untrusted').last().innerText()).toContain('Token buckets refill');
    await shoot(page, 'research-run');

    for (const url of [`${origin}/tasks/${hostileTask}`, `${origin}/research/${runId}`, `${origin}/tasks`]) {
      await page.goto(url);
      expect(await page.evaluate(() => (globalThis as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
      expect(await page.title()).not.toContain('pwned');
      expect(await page.locator('main img, main svg, main script').count()).toBe(0);
    }
    expect(reports).toEqual([]);
  }, 150_000);

  it("a running task's timeline updates without a reload", async () => {
    await waitFor('the held task\'s three candidates to run', async () => (await daemon!.store.listAttempts(heldTask)).filter((a) => a.stage.startsWith('candidate') && a.status === 'running').length === 3, 60_000, 100);
    const { page, reports } = await watchedPage(rootBrowser!);
    await page.goto(`${origin}/tasks/${heldTask}`);
    expect(await page.locator('main[data-live]').count()).toBe(1);
    expect(await page.locator('#task-state').innerText()).toBe('candidates_running');
    expect(await page.locator('tr.attempt[data-status="running"]').count()).toBe(3);
    await shoot(page, 'task-running');
    // Marks this document: a reload would lose the mark.
    await page.evaluate(() => ((globalThis as unknown as { __sameDocument: boolean }).__sameDocument = true));
    release();
    // A function, not a string: the page's CSP forbids eval, which a string predicate needs.
    await page.waitForFunction(() => (globalThis as unknown as { document: { querySelector(s: string): { textContent: string | null } | null } }).document.querySelector('#task-state')?.textContent === 'completed', undefined, { timeout: 100_000, polling: 250 });
    expect(await page.evaluate(() => (globalThis as unknown as { __sameDocument?: boolean }).__sameDocument)).toBe(true);
    expect(await page.locator('tr.attempt[data-stage="merger"][data-status="succeeded"]').count()).toBe(1);
    expect(await page.locator('main[data-live]').count()).toBe(0);
    expect(reports).toEqual([]);
  }, 150_000);

  it('a socket-group member sees only its own tasks; a user outside the group is refused', async () => {

    const ctx = await browserAs(alice);
    const { page } = await watchedPage(ctx);
    await page.goto(`${origin}/tasks`);
    expect(await page.locator('header .viewer').innerText()).toContain('your own tasks');
    const links = await page.locator('table.tasks tbody tr td:first-child a').allInnerTexts();
    expect(links).toEqual([aliceTask]);
    await shoot(page, 'member-tasks');
    // Fetched by the browser itself (page.request would be playwright's own process, root).
    const fetchInPage = (path: string): Promise<{ status: number; text: string }> =>
      page.evaluate(async (url) => {
        const r = await fetch(url);
        return { status: r.status, text: await r.text() };
      }, `${origin}${path}`);
    for (const path of [`/tasks/${hostileTask}`, `/tasks/${hostileTask}/audit.tar`, `/research/${runId}`]) {
      const r = await fetchInPage(path);
      expect(r.status).toBe(404);
      expect(r.text).not.toContain('refill');
    }
    // Her own task, its page and, once sealed, its tarball are hers to read.
    await waitFor("alice's task to be sealed", async () => (await daemon!.store.getTaskTarball(aliceTask)) !== null, 90_000, 200);
    expect((await fetchInPage(`/tasks/${aliceTask}`)).status).toBe(200);
    expect((await fetchInPage(`/tasks/${aliceTask}/audit.tar`)).status).toBe(200);

    const outsider = await browserAs(carol);
    const other = await outsider.newPage();
    const answer = await other.goto(`${origin}/`);
    expect(answer?.status()).toBe(403);
    expect(await other.locator('main').innerText()).toContain('may not use this dashboard');
  }, 120_000);
});
