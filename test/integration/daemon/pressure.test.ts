/**
 * Admission control and visible queueing over the real socket (stub workflow), and
 * honest CLI answers under pressure: busy with Retry-After, `--state queued`, truncated lists,
 * a daemon that goes away under `fusion wait` (exit 3), EPIPE, a file given as --data.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/wait.js';
import { INVESTIGATE_ARGS, ROOT, STARTED_RUNNING, startStubDaemon, stopDaemon, tempHome, waitForTask, type DaemonProc } from './helpers.js';

type Json = Record<string, any>;
const CLI = join(ROOT, 'dist', 'src', 'cli', 'main.js');
const exec = promisify(execFile);
const cli = (args: string[]): Promise<{ code: number; stdout: string; stderr: string }> & { pid: number } => {
  const running = exec(process.execPath, [CLI, ...args], { cwd: ROOT, env: { ...process.env, FUSION_HOME: '/nonexistent-fusion-home' } });
  const settled = running.then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );
  return Object.assign(settled, { pid: running.child.pid! });
};

/**
 * The pids at the client end of the connections a server accepted on the Unix socket `path`
 * (`ss -xp`: an accepted socket is listed under the server's path with its peer's inode).
 */
function connectedPids(path: string): number[] {
  const rows = execFileSync('ss', ['-xpH', 'state', 'established'], { encoding: 'utf8' }).split('\n').map((l) => l.trim().split(/\s+/));
  // Columns: netid recv-q send-q local-address local-inode peer-address peer-inode users
  const peers = new Set(rows.filter((r) => r[3] === path).map((r) => r[6]));
  return rows.filter((r) => peers.has(r[4])).flatMap((r) => [...(r[7] ?? '').matchAll(/pid=(\d+)/g)].map((m) => Number(m[1])));
}

const daemons: DaemonProc[] = [];
afterEach(async () => {
  for (const d of daemons.splice(0)) await stopDaemon(d, 'SIGKILL');
});

async function submit(d: DaemonProc, caller?: string): Promise<{ status: number; body: Json; retryAfter: string | undefined }> {
  const { request } = await import('node:http');
  const payload = Buffer.from(JSON.stringify({ arguments: INVESTIGATE_ARGS, repo: ROOT }));
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath: d.socket, method: 'POST', path: '/v1/tasks/investigate', headers: { 'content-type': 'application/json', 'content-length': payload.length, ...(caller ? { 'x-fusion-caller': caller } : {}) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json, retryAfter: res.headers['retry-after'] as string | undefined }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** A submit that sends its headers and never its body: answered only if refused before the body is read. */
async function submitWithoutBody(d: DaemonProc, caller: string): Promise<{ status: number; body: Json }> {
  const { request } = await import('node:http');
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath: d.socket, method: 'POST', path: '/v1/tasks/investigate', headers: { 'content-type': 'application/json', 'content-length': 4096, 'x-fusion-caller': caller } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json });
          req.destroy();
        });
      },
    );
    req.on('error', reject);
    req.flushHeaders();
  });
}

describe('admission control and visible queueing', () => {
  it('bounds waiting tasks per caller and per daemon with busy (429, Retry-After); waiting tasks show as queued', async () => {
    const d = await startStubDaemon(tempHome(), 3_000, 0, { taskConcurrency: 1, maxQueuedTasks: 3, maxQueuedPerCaller: 2 });
    daemons.push(d);
    const running = await submit(d, 'a');
    expect(running.status).toBe(202);
    await waitForTask(d.client, String(running.body.taskId), 'to take the one run slot', STARTED_RUNNING);
    const a1 = await submit(d, 'a');
    const a2 = await submit(d, 'a');
    expect([a1.status, a2.status]).toEqual([202, 202]);
    const a3 = await submit(d, 'a');
    expect(a3.status).toBe(429);
    expect(a3.body.error).toMatchObject({ code: 'busy', details: { scope: 'caller', limit: 2, waiting: 2 } });
    expect(Number(a3.retryAfter)).toBeGreaterThanOrEqual(1);
    const b1 = await submit(d, 'b');
    expect(b1.status).toBe(202);
    const b2 = await submit(d, 'b');
    expect(b2.status).toBe(429);
    expect(b2.body.error).toMatchObject({ code: 'busy', details: { scope: 'daemon', limit: 3 } });
    expect(b2.body.error.message).toMatch(/nothing was created/);
    // Refused on its headers: a full daemon does not wait for (nor parse) the body of a submit.
    const unread = await submitWithoutBody(d, 'b');
    expect(unread.status).toBe(429);
    expect(unread.body.error).toMatchObject({ code: 'busy', details: { scope: 'daemon', limit: 3 } });

    // Refused submits created nothing; the waiting ones say so.
    const all = (await d.client.call('GET', '/v1/tasks')) as Json;
    expect(all.tasks).toHaveLength(4);
    const queued = (await d.client.call('GET', '/v1/tasks?state=queued')) as Json;
    expect(queued.tasks.map((t: Json) => t.taskId).sort()).toEqual([a1.body.taskId, a2.body.taskId, b1.body.taskId].sort());
    expect(((await d.client.call('GET', `/v1/tasks/${String(a1.body.taskId)}`)) as Json).state).toBe('queued');

    // The CLI lists them and says when a submit is refused.
    const listed = await cli(['tasks', '--state', 'queued', '--socket', d.socket]);
    expect(listed.code).toBe(0);
    expect(listed.stdout.trim().split('\n').filter((l) => l.includes(' queued '))).toHaveLength(3);
    const refused = await cli(['investigate', '--objective', 'o', '--background', 'b', '--deliverable', 'd', '--repo', ROOT, '--socket', d.socket]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/busy: the daemon is busy: .*Retry in about \d+ s/);
    // A list cut by --limit says so and how to see more.
    const cut = await cli(['tasks', '--limit', '2', '--socket', d.socket]);
    expect(cut.stdout.trim().split('\n').filter((l) => l.startsWith('investigate-'))).toHaveLength(2);
    expect(cut.stderr).toMatch(/showing the newest 2 tasks; more exist: raise --limit/);
    expect((await cli(['tasks', '--socket', d.socket])).stderr).toBe('');

    // A queued task starts in its turn: cancel the running one, and the first waiting one runs.
    await d.client.call('POST', `/v1/tasks/${String(running.body.taskId)}/cancel`);
    const turn = await waitForTask(d.client, String(a1.body.taskId), 'to leave the queue', (t) => t.state !== 'queued', 10_000);
    expect(turn.state).toBe('candidates_running');
    // Its waiting place was freed: caller a may queue one more.
    expect((await submit(d, 'a')).status).toBe(202);
  }, 90_000);
});

describe('honest CLI answers', () => {
  it('cancelling a queued task frees its waiting place at once (not when a run slot frees)', async () => {
    const d = await startStubDaemon(tempHome(), 3_000, 0, { taskConcurrency: 1, maxQueuedTasks: 2, maxQueuedPerCaller: 2 });
    daemons.push(d);
    const first = await submit(d, 'a');
    expect(first.status).toBe(202);
    await waitForTask(d.client, String(first.body.taskId), 'to take the one run slot', STARTED_RUNNING);
    const q1 = await submit(d, 'a');
    const q2 = await submit(d, 'a');
    expect([q1.status, q2.status]).toEqual([202, 202]);
    expect((await submit(d, 'a')).status).toBe(429);
    // Both waiting tasks are cancelled: nothing waits any more, so the caller and the daemon have room.
    for (const q of [q1, q2]) expect(((await d.client.call('POST', `/v1/tasks/${q.body.taskId}/cancel`)) as Json).state).toBe('cancelled');
    const again = await submit(d, 'a');
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    const other = await submit(d, 'b');
    expect(other.status, JSON.stringify(other.body)).toBe(202);
  });

  it('fusion wait exits 3 with what to do when the daemon goes away under it (not "task failed")', async () => {
    const d = await startStubDaemon(tempHome(), 5_000);
    daemons.push(d);
    const r = await submit(d);
    const waiting = cli(['wait', String(r.body.taskId), '--timeout', '60', '--socket', d.socket]);
    // Killed only once the daemon holds the CLI's connection: the wait is under way, not refused at connect.
    await waitFor('the daemon to hold fusion wait\'s connection', () => connectedPids(d.socket).includes(waiting.pid));
    await stopDaemon(d, 'SIGKILL');
    const out = await waiting;
    expect(out.code).toBe(3);
    expect(out.stderr).toMatch(/went away while waiting for task .*has not failed/);
    expect(out.stderr).toContain(`fusion wait ${String(r.body.taskId)}`);
    expect(out.stderr).toContain(`fusion cancel ${String(r.body.taskId)}`);
  }, 30_000);

  it('EPIPE ends the CLI quietly (fusion help | true)', async () => {
    const out = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const p = spawn('bash', ['-c', `set -o pipefail; "${process.execPath}" "${CLI}" help | true; exit \${PIPESTATUS[0]}`], { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      p.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
      p.on('exit', (code) => resolve({ code, stderr }));
    });
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
  });

  it('a file given as --data is named with the problem, not an internal_error', async () => {
    const status = await cli(['status', 'investigate-00000000000000000000000000000000', '--data', '/etc/passwd']);
    expect(status.stderr).not.toMatch(/internal_error/);
    expect(status.stderr).toMatch(/\/etc\/passwd.*(not a directory|a file)/);
    const daemon = await cli(['daemon', '--data', '/etc/passwd']);
    expect(daemon.code).not.toBe(0);
    expect(daemon.stderr).not.toMatch(/internal_error/);
    expect(daemon.stderr).toMatch(/data directory \/etc\/passwd exists and is not a directory/);
  });
});
