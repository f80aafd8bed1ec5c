/**
 * Non-root callers (docs/security.md#socket-callers, docs/operations.md#agent-accounts), end to
 * end: a real `fusion daemon --socket-group G` (root, bwrap, builtin engine) and real users made
 * for the test. Each user runs the real CLI (or a bare node:http client) through `setpriv` with
 * their own uid and groups; the package is bind-mounted at a world-readable path in a private
 * mount namespace, so the test works wherever the clone lives (a 0700 home included).
 *
 *   alice (in G)  runs `investigate --wait` on a repository in her own 0700 home and gets a
 *                 verified answer; sees the task, waits it, reads its result and events;
 *                 her repository that she cannot read is refused, and nothing is created
 *   bob   (in G)  is not the owner: 404 on status, result, wait, events, cancel; an empty list
 *   carol (not in G) cannot open the socket at all
 *   root          sees everything
 *
 * Needs root (useradd, setpriv, unshare); skips loudly elsewhere, fails under CI=true.
 */
import { execFileSync, spawn } from 'node:child_process';
import { runCommand, startCli, type RunResult, type Started } from '../../helpers/cli.js';
import { describeUnless, missingPrerequisite } from '../../helpers/gates.js';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { addTestUser, removeTestUsers } from '../../helpers/test-users.js';

const ROOT = resolve(import.meta.dirname, '..', '..', '..');
const FIXTURE_REPO = join(ROOT, 'test', 'fixtures', 'e2e', 'repo');
const ARGS = ['--objective', 'Find where the token bucket refills tokens', '--background', 'Bursts after a pause', '--deliverable', 'The file and lines'];

type Run = RunResult;

/** Runs `cmd` with exactly `env` (nothing of this process's environment). */
const run = (cmd: string, args: string[], env: Record<string, string>): Promise<Run> => runCommand(cmd, args, { env, cleanEnv: true });

const sh = (cmd: string, ...args: string[]): string => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

// Needs root for useradd, setpriv and unshare (test/helpers/gates.ts).
describeUnless(missingPrerequisite({ root: true }), 'non-root callers over a --socket-group socket', () => {
  const tag = randomBytes(3).toString('hex');
  const group = `fsg${tag}`;
  const alice = `fsa${tag}`;
  const bob = `fsb${tag}`;
  const carol = `fsc${tag}`;
  let base = '';
  let view = '';
  let home = '';
  let socket = '';
  let repo = '';
  let daemon: Started | undefined;

  /** Runs `argv` as `user` (uid, primary gid and supplementary groups from the user database). */
  const asUser = (user: string, argv: string[]): Promise<Run> => {
    const script = 'mount --bind "$1" "$2" && shift 2 && exec setpriv --reuid="$FUSION_TEST_USER" --regid="$FUSION_TEST_USER" --init-groups -- "$@"';
    return run('unshare', ['--mount', '--propagation', 'private', '--', '/bin/sh', '-c', script, 'sh', ROOT, view, ...argv], {
      PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: base, FUSION_TEST_USER: user, FUSION_LOG_LEVEL: 'warn',
    });
  };
  const cli = (user: string, ...args: string[]): Promise<Run> => asUser(user, [process.execPath, join(view, 'dist', 'src', 'cli', 'main.js'), ...args, '--socket', socket]);
  /** A bare HTTP request over the socket as `user` (node:http only: nothing of the package). */
  const http = async (user: string, method: string, path: string, body?: unknown): Promise<{ status: number; text: string }> => {
    const script = `const r=require('node:http').request({socketPath:${JSON.stringify(socket)},method:${JSON.stringify(method)},path:${JSON.stringify(path)},headers:${JSON.stringify(body === undefined ? {} : { 'content-type': 'application/json' })}},(res)=>{let t='';res.on('data',(c)=>t+=c);res.on('end',()=>{process.stdout.write(JSON.stringify({status:res.statusCode,text:t}))})});r.on('error',(e)=>{process.stdout.write(JSON.stringify({status:-1,text:e.code}))});r.end(${JSON.stringify(body === undefined ? '' : JSON.stringify(body))});`;
    const r = await asUser(user, [process.execPath, '-e', script]);
    return JSON.parse(r.stdout) as { status: number; text: string };
  };
  /** `fusion mcp` as `user` (stdio JSON-RPC): initialize, then one tools/call; its reply. */
  const mcpCall = (user: string, tool: string, args: Record<string, unknown>, mcpRepo = repo): Promise<{ isError?: boolean; content: { text: string }[] }> => {
    const script = 'mount --bind "$1" "$2" && shift 2 && exec setpriv --reuid="$FUSION_TEST_USER" --regid="$FUSION_TEST_USER" --init-groups -- "$@"';
    const child = spawn('unshare', ['--mount', '--propagation', 'private', '--', '/bin/sh', '-c', script, 'sh', ROOT, view, process.execPath, join(view, 'dist', 'src', 'cli', 'main.js'), 'mcp', '--repo', mcpRepo], {
      // The socket comes from the environment, as an agent's MCP configuration would set it.
      env: { PATH: process.env.PATH ?? '', HOME: base, FUSION_TEST_USER: user, FUSION_SOCKET: socket, FUSION_LOG_LEVEL: 'warn' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const send = (m: unknown): boolean => child.stdin.write(`${JSON.stringify(m)}\n`);
    send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '0' } } });
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: tool, arguments: args } });
    return new Promise((done, fail) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        fail(new Error(`fusion mcp as ${user} gave no reply: ${err}`));
      }, 60_000);
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        for (const line of out.split('\n')) {
          if (!line.includes('"id":2')) continue;
          clearTimeout(timer);
          child.kill('SIGTERM');
          done((JSON.parse(line) as { result: { isError?: boolean; content: { text: string }[] } }).result);
          return;
        }
      });
    });
  };
  const rootCli = (...args: string[]): Promise<Run> => run(process.execPath, [join(ROOT, 'dist', 'src', 'cli', 'main.js'), ...args, '--socket', socket], { PATH: process.env.PATH ?? '', HOME: base, FUSION_LOG_LEVEL: 'warn' });
  const taskCount = (): number => readdirSync(join(home, 'tasks')).length;

  beforeAll(async () => {
    sh('groupadd', group);
    addTestUser(alice, [group]);
    addTestUser(bob, [group]);
    addTestUser(carol);
    base = mkdtempSync(join(tmpdir(), 'fusion-callers-'));
    chmodSync(base, 0o755);
    view = join(base, 'view');
    mkdirSync(view, { mode: 0o755 });
    home = join(base, 'home');
    socket = join(base, 'run', 'fusion.sock');
    // Alice's repository lives in her own 0700 home (docs/security.md#private-repos): neither the
    // sandbox uids nor bob can traverse to it; the daemon binds it for her attempts only.
    const aliceHome = join(base, 'home-alice');
    repo = join(aliceHome, 'code', 'repo');
    mkdirSync(join(aliceHome, 'code'), { recursive: true });
    cpSync(FIXTURE_REPO, repo, { recursive: true });
    sh('chown', '-R', `${alice}:${alice}`, aliceHome);
    sh('chmod', '-R', 'u=rwX,go=rX', aliceHome);
    chmodSync(aliceHome, 0o700);

    daemon = startCli(['daemon', '--data', home, '--socket', socket, '--socket-group', group, '--sandbox', 'bwrap', '--log-level', 'warn'], {
      env: { PATH: process.env.PATH ?? '', HOME: base },
      cleanEnv: true,
    });
    await daemon.waitForText('stderr', /fusion daemon listening/, 'the daemon to start');
  }, 60_000);

  afterAll(async () => {
    await daemon?.stop();
    removeTestUsers([alice, bob, carol], [group]);
    if (base !== '') rmSync(base, { recursive: true, force: true });
  }, 60_000);

  it('shares the socket 0660 with the group, in a 0750 directory of the group; the data directory stays 0700', () => {
    const gid = Number(sh('getent', 'group', group).split(':')[2]);
    const s = statSync(socket);
    expect({ mode: s.mode & 0o777, uid: s.uid, gid: s.gid }).toEqual({ mode: 0o660, uid: 0, gid });
    const d = statSync(join(base, 'run'));
    expect({ mode: d.mode & 0o777, gid: d.gid }).toEqual({ mode: 0o750, gid });
    expect(statSync(home).mode & 0o777).toBe(0o700);
  });

  let taskId = '';
  it('a member of the group runs investigate --wait on a repository in her own 0700 home and gets a verified answer', async () => {
    const answered = await cli(alice, 'investigate', '--repo', repo, ...ARGS, '--wait');
    expect({ code: answered.code, verified: /\(verified\)/.test(answered.stderr) }, answered.stderr).toEqual({ code: 0, verified: true });
    expect(answered.stdout.length).toBeGreaterThan(0);
    const mine = await cli(alice, 'tasks', '--json');
    const ids = (JSON.parse(mine.stdout) as { tasks: { taskId: string }[] }).tasks.map((t) => t.taskId);
    expect(ids).toHaveLength(1);
    taskId = ids[0]!;

    const waited = await cli(alice, 'wait', taskId, '--timeout', '180', '--json');
    expect({ code: waited.code, stderr: waited.stderr }).toEqual({ code: 0, stderr: '' });
    expect((JSON.parse(waited.stdout) as { task: { state: string } }).task.state).toBe('completed');

    const status = await cli(alice, 'status', taskId, '--json');
    expect(JSON.parse(status.stdout)).toMatchObject({ taskId, state: 'completed', repo });
    const listed = await cli(alice, 'tasks', '--json');
    expect((JSON.parse(listed.stdout) as { tasks: { taskId: string }[] }).tasks.map((t) => t.taskId)).toEqual([taskId]);
    const result = await cli(alice, 'result', taskId);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/\(verified\)/);
    const events = await http(alice, 'GET', `/v1/tasks/${taskId}/events?follow=false`);
    expect(events.status).toBe(200);
    expect(events.text).toContain('"kind":"terminal"');
    // An artifact's path is in the daemon's 0700 data directory: the CLI fetches the verified
    // bytes over the socket instead of printing a path she cannot open.
    const artifact = await cli(alice, 'result', taskId, '--delivery', 'artifact');
    expect({ code: artifact.code, stderr: artifact.stderr }).toMatchObject({ code: 0, stderr: expect.stringContaining('is not readable by this user: the verified answer came over the socket') });
    expect(artifact.stdout).toBe(result.stdout);
    const bytes = await http(alice, 'GET', `/v1/tasks/${taskId}/answer`);
    expect(bytes.status).toBe(200);
    expect(`${bytes.text}${bytes.text.endsWith('\n') ? '' : '\n'}`).toBe(result.stdout);
  }, 240_000);

  it('another member is not the owner: every read of the task is 404 as for a missing task, and its list is empty', async () => {
    const missing = await http(bob, 'GET', '/v1/tasks/investigate-00000000000000000000000000000000');
    for (const [method, path] of [['GET', `/v1/tasks/${taskId}`], ['GET', `/v1/tasks/${taskId}/result`], ['GET', `/v1/tasks/${taskId}/answer`], ['GET', `/v1/tasks/${taskId}/wait?timeoutMs=0`], ['GET', `/v1/tasks/${taskId}/events?follow=false`], ['POST', `/v1/tasks/${taskId}/cancel`]] as const) {
      const r = await http(bob, method, path);
      expect({ path, status: r.status, code: (JSON.parse(r.text) as { error: { code: string } }).error.code }).toEqual({ path, status: 404, code: 'not_found' });
    }
    // Same answer as a task that does not exist (only the id in the message differs).
    expect(missing.status).toBe(404);
    const status = await cli(bob, 'status', taskId);
    expect(status.code).toBe(1);
    expect(status.stderr).toContain(`not_found: no task with id ${taskId}`);
    const listed = await cli(bob, 'tasks', '--json');
    expect(JSON.parse(listed.stdout)).toMatchObject({ tasks: [] });
    // The all-tasks stream carries nothing of alice's; metrics and maintenance are the admin's.
    expect((await http(bob, 'GET', '/v1/events?follow=false')).text).toBe('');
    expect((await http(bob, 'GET', '/metrics')).status).toBe(403);
    // Health is liveness only for a member: no data directory, roster, free space or queue depths.
    expect(Object.keys(JSON.parse((await http(bob, 'GET', '/v1/health')).text) as object).sort()).toEqual(['ok', 'startedAt', 'version']);
    expect((await http(bob, 'POST', '/v1/admin/maintenance/backup')).status).toBe(403);
  }, 120_000);

  it('fusion mcp runs as the caller: the owner reads her task, another member is told it does not exist', async () => {
    const mine = await mcpCall(alice, 'bg_status', { taskId });
    expect(mine.isError ?? false).toBe(false);
    expect(mine.content[0]!.text).toContain('completed');
    // An artifact she cannot open comes back as the answer's text, not an unreadable path.
    const artifact = await mcpCall(alice, 'bg_result', { taskId, delivery: 'artifact' });
    expect(artifact.isError ?? false).toBe(false);
    expect(artifact.content[0]!.text).toMatch(/\(verified\)/);
    expect(artifact.content[0]!.text).not.toContain('The answer is stored at');
    // Bob cannot traverse alice's 0700 home: his own MCP server is configured with a directory he reads.
    const theirs = await mcpCall(bob, 'bg_status', { taskId }, base);
    expect(theirs.isError).toBe(true);
    expect(theirs.content[0]!.text).toContain(`no task with id ${taskId}`);
  }, 150_000);

  it('a user outside the group cannot open the socket (forbidden, and no embedded daemon is started)', async () => {
    const r = await cli(carol, 'tasks', '--json');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`fusion: forbidden: the fusion daemon at .* runs, but .* ${carol} is not in ${group}; ask an admin: sudo usermod -aG ${group} ${carol}`));
    expect((await http(carol, 'GET', '/v1/health')).text).toBe('EACCES');
  }, 60_000);

  it('refuses a repository the caller cannot read, naming repo, with nothing created', async () => {
    const before = taskCount();
    // Enterable but not readable by alice: the CLI's own check passes, the daemon's (as alice) does not.
    const locked = join(base, 'locked');
    cpSync(FIXTURE_REPO, locked, { recursive: true });
    chmodSync(locked, 0o711);
    const r = await cli(alice, 'investigate', '--repo', locked, ...ARGS, '--json');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`invalid_input: repo ${locked} is not a directory uid`);
    // Under a directory alice cannot traverse (root's own 0700 tree): the same answer, raw API.
    const hidden = join(base, 'private');
    mkdirSync(join(hidden, 'repo'), { recursive: true, mode: 0o700 });
    chmodSync(hidden, 0o700);
    const raw = await http(alice, 'POST', '/v1/tasks/investigate', { arguments: { objective: 'x', background: ['y'], deliverable: 'z' }, repo: join(hidden, 'repo') });
    expect(raw.status).toBe(400);
    expect(JSON.parse(raw.text)).toMatchObject({ error: { code: 'invalid_input', details: { field: 'repo', reason: 'not_readable_by_caller' } } });
    // Bob's private repository (0700, his): refused for alice too.
    const bobs = join(base, 'repo-bob');
    cpSync(FIXTURE_REPO, bobs, { recursive: true });
    sh('chown', '-R', `${bob}:${bob}`, bobs);
    chmodSync(bobs, 0o700);
    expect((await http(alice, 'POST', '/v1/tasks/investigate', { arguments: { objective: 'x', background: ['y'], deliverable: 'z' }, repo: bobs })).status).toBe(400);
    expect(taskCount()).toBe(before);
    const listed = await cli(alice, 'tasks', '--json');
    expect((JSON.parse(listed.stdout) as { tasks: unknown[] }).tasks).toHaveLength(1);
  }, 120_000);

  it('root sees everything: every task, with its caller recorded', async () => {
    const listed = await rootCli('tasks', '--json');
    expect((JSON.parse(listed.stdout) as { tasks: { taskId: string }[] }).tasks.map((t) => t.taskId)).toContain(taskId);
    expect(JSON.parse((await http('root', 'GET', '/v1/health')).text)).toHaveProperty('sandbox');
    const status = await rootCli('status', taskId, '--json');
    expect(JSON.parse(status.stdout)).toMatchObject({ taskId, state: 'completed', callerUid: Number(sh('id', '-u', alice).trim()) });
  }, 60_000);
});
