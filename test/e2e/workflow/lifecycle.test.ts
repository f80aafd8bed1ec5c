/**
 * cancel during the candidate stage (in-process daemon) and kill -9
 * of a daemon process mid-run, then restart recovery (spawned daemon,
 * test/fixtures/e2e/workflow-daemon.mjs). Both with real bwrap sandboxes.
 */
import { execFile } from 'node:child_process';
import { startFixtureDaemon, type FixtureDaemon } from '../../helpers/cli.js';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, expect, it } from 'vitest';
import { FusionClient } from '../../../src/client/index.js';
import { CANDIDATE_REPLAY_LABEL } from '../../../src/workflow/replay-attempt.js';
import {
  isSandboxUid,
  DIST,
  REFILL_ARGS,
  ROOT,
  builtinRoster,
  copyFixtureRepo,
  describeWithBwrap,
  freshRunRoot,
  latch,
  ourSandboxProcesses,
  slowCandidate,
  startE2EDaemon,
  stillAlive,
  treeOf,
  waitFor,
  type E2EDaemon,
  type ProcInfo,
} from './helpers.js';

const run = promisify(execFile);
const sha256 = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describeWithBwrap('fusion workflow e2e: cancel and crash recovery', () => {
  it('cancel during the candidate stage stops every sandbox and removes the staging directories', async () => {
    const entered = latch(3);
    const d: E2EDaemon = await startE2EDaemon({
      roster: builtinRoster({
        candidates: {
          1: slowCandidate('content-search', 60_000, entered.mark),
          2: slowCandidate('path-search', 60_000, entered.mark),
          3: slowCandidate('definition-search', 60_000, entered.mark),
        },
      }),
    });
    cleanups.push(() => d.close());
    const { taskId } = await d.submit();
    await entered.done;
    // Three candidate sandboxes (and the task's replay sandbox beside them).
    const snapshot: ProcInfo[] = await waitFor('three sandboxes with their children', () => {
      const candidates = d.launches.filter((l) => !l.label.endsWith('.replay')).map((l) => l.pid!).filter(Boolean);
      const tree = treeOf(d.launches.map((l) => l.pid!).filter(Boolean));
      return candidates.length === 3 && treeOf(candidates).length >= 9 ? tree : undefined;
    });
    expect(snapshot.every((p) => isSandboxUid(p.uid))).toBe(true);
    if (process.getuid?.() === 0) {
      // One uid per sandbox: no two live sandboxes (three candidates, their replay) share one.
      const uidOfLaunch = d.launches.map((l) => treeOf([l.pid!]).find((p) => p.pid === l.pid)?.uid).filter((u) => u !== undefined);
      expect(uidOfLaunch.length).toBeGreaterThanOrEqual(3);
      expect(new Set(uidOfLaunch).size).toBe(uidOfLaunch.length);
    }
    // The probe used after the run sees them too (it is not vacuous).
    expect(ourSandboxProcesses().length).toBeGreaterThanOrEqual(9);
    expect(readdirSync(d.runRoot).sort()).toEqual([...['candidate-1', 'candidate-2', 'candidate-3'].map((s) => `${taskId.slice(-12)}-${s}.attempt-1`), `${taskId.slice(-12)}-${CANDIDATE_REPLAY_LABEL}`]);
    expect((await d.daemon.store.getTask(taskId))!.state).toBe('candidates_running');

    const started = Date.now();
    const view = (await d.client.call('POST', `/v1/tasks/${taskId}/cancel`)) as Record<string, any>;
    const cancelMs = Date.now() - started;
    expect(view).toMatchObject({ taskId, state: 'cancelled', status: 'cancelled', error: { code: 'cancelled', state: 'candidates_running' } });
    // Cancel returns once the task's sandboxes are gone (SIGTERM, at most a 3 s grace, SIGKILL).
    expect(cancelMs).toBeLessThan(10_000);
    expect(stillAlive(snapshot)).toEqual([]);
    expect(ourSandboxProcesses()).toEqual([]);
    for (const l of d.launches) expect(l.exit?.reason).toBe('aborted');
    expect(readdirSync(d.runRoot)).toEqual([]);
    const attempts = await d.daemon.store.listAttempts(taskId);
    expect(attempts.map((a) => `${a.stage}:${a.status}`).sort()).toEqual(['candidate-1:failed', 'candidate-2:failed', 'candidate-3:failed']);
    for (const a of attempts) expect(a.endedAt).not.toBeNull();
    // Terminal states have no exit; nothing was committed.
    const result = (await d.client.call('GET', `/v1/tasks/${taskId}/result`)) as Record<string, any>;
    expect(result).toMatchObject({ status: 'cancelled', answer: { present: false, reason: 'run_did_not_commit' } });
    // An absence: nothing marks "no late write is coming", so this window is where a run that
    // wrote after its cancel would show.
    await new Promise((r) => setTimeout(r, 300));
    expect((await d.daemon.store.getTask(taskId))!.state).toBe('cancelled');
    expect(await d.daemon.store.getCheckpoint(taskId, 'candidates')).toBeNull();
  });

  it('kill -9 of the daemon mid-run leaves no sandbox behind; after restart the task resumes and bg_result tells the truth', async () => {
    const home = mkdtempSync(join(tmpdir(), 'fusion-e2e-home-'));
    const fixture = copyFixtureRepo();
    const runRoot = freshRunRoot();
    cleanups.push(() => {
      for (const dir of [home, fixture.root, runRoot]) rmSync(dir, { recursive: true, force: true });
    });

    const first = await spawnWorkflowDaemon(home, runRoot, 60_000);
    cleanups.push(() => first.started.stop().then(() => undefined));
    const client = new FusionClient(first.socket);
    const receipt = (await client.call('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo: fixture.repo })) as { taskId: string };
    const taskId = receipt.taskId;
    await waitFor('three candidates inside a model call', () => first.lines().filter((l) => l.startsWith(`ENTER ${taskId} `)).length === 3, 30_000);
    const launched = first.lines().filter((l) => l.startsWith('LAUNCH '));
    // Three candidates, and the task's replay sandbox beside them.
    const bwrapPids = launched.filter((l) => !l.split(' ')[1]!.endsWith('.replay')).map((l) => Number(l.split(' ')[2]));
    expect(bwrapPids).toHaveLength(3);
    const snapshot = treeOf(launched.map((l) => Number(l.split(' ')[2])));
    // bwrap, the sandbox init and the node child, for each of the three.
    expect(snapshot.length).toBeGreaterThanOrEqual(9);
    expect(snapshot.every((p) => isSandboxUid(p.uid))).toBe(true);
    for (const pid of bwrapPids) expect(snapshot.find((p) => p.pid === pid)!.ppid).toBe(first.pid);

    await first.started.stop('SIGKILL');
    // bwrap runs with --die-with-parent: the whole sandbox dies with the daemon.
    await waitFor('the sandboxes to die with the daemon', () => stillAlive(snapshot).length === 0, 10_000);
    expect(stillAlive(snapshot)).toEqual([]);

    // Restart on the same home, no delay: recovery resumes the task from its last boundary.
    const second = await spawnWorkflowDaemon(home, runRoot, 0);
    cleanups.push(() => second.started.stop().then(() => undefined));
    const client2 = new FusionClient(second.socket);
    const waited = (await client2.call('GET', `/v1/tasks/${taskId}/wait?timeoutMs=90000`)) as { terminal: boolean; task: Record<string, any> };
    expect(waited.terminal).toBe(true);
    const task = waited.task;
    expect(task.resumeCount).toBe(1);
    if (task.state === 'failed') {
      // The only acceptable failure after a restart.
      expect(task.error.code).toBe('supervisor_restarted');
    } else {
      expect(task.state).toBe('completed');
    }

    // `fusion result` tells the truth, through the CLI over the socket.
    const cli = await run(process.execPath, [join(DIST, 'src', 'cli', 'main.js'), 'result', taskId, '--json', '--socket', second.socket], { cwd: ROOT }).catch((err: { code: number; stdout: string; stderr: string }) => err);
    const reply = JSON.parse(cli.stdout) as Record<string, any>;
    if (task.state === 'completed') {
      expect((cli as { code?: number }).code ?? 0).toBe(0);
      const answer = readFileSync(join(home, 'tasks', taskId, 'result', 'answer.md'));
      expect(reply).toMatchObject({ taskId, status: 'completed', delivery: 'inline', answer: { present: true, verified: true, bytes: answer.length, sha256: sha256(answer) } });
      expect(reply.answer.text).toContain('src/token-bucket.js');
      // The resumed candidates ran as new attempts (a sealed log is never reused).
      const metadata = JSON.parse(readFileSync(join(home, 'tasks', taskId, 'result', 'metadata.json'), 'utf8')) as { attempts: Array<{ stage: string; attempt: number }> };
      expect(metadata.attempts.filter((a) => a.stage.startsWith('candidate-')).map((a) => a.attempt)).toEqual([2, 2, 2]);
      // Their files live in the sealed task tarball now (bg_result checked them there); the
      // unpacked copies were pruned once it was sealed (each attempt kept once).
      expect(existsSync(join(home, 'tasks', taskId, 'attempts'))).toBe(false);
    } else {
      expect((cli as { code?: number }).code).toBe(1);
      expect(reply).toMatchObject({ taskId, status: 'failed', answer: { present: false, reason: 'run_did_not_commit' } });
    }
  });
});

async function spawnWorkflowDaemon(home: string, runRoot: string, delayMs: number): Promise<FixtureDaemon> {
  return startFixtureDaemon(join(ROOT, 'test', 'fixtures', 'e2e', 'workflow-daemon.mjs'), [home, runRoot, String(delayMs)]);
}
