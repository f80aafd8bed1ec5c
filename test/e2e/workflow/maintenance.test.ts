/**
 * Bree maintenance jobs on a short schedule through a real daemon: retention and backup run
 * while a task is in flight and never touch it; the orphan reaper removes a container a killed
 * daemon of the same data directory left running, even when this daemon uses bwrap.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterEach, describe, expect, it } from 'vitest';
import { buildConfig, startDaemon, type Daemon } from '../../../src/main.js';
import { CHILD_IMAGE, LABELS } from '../../../src/launcher/docker-config.js';
import { SqliteDb } from '../../../src/store/sqlite-db.js';
import { silentLogger } from '../../../src/log.js';
import { canonicalJson, sha256Hex } from '../../../src/contracts/canonical.js';
import { captureLogs, builtinRoster, describeWithBwrap, slowCandidate, startE2EDaemon, waitFor, type E2EDaemon } from './helpers.js';
import { describeBackend } from '../containment/helpers.js';

let d: E2EDaemon | undefined;
afterEach(async () => {
  await d?.close();
  d = undefined;
});

describeWithBwrap('maintenance jobs (short schedule)', () => {
  it('retention deletes old terminal tasks and backups rotate, while the running task is untouched', async () => {
    const backupDir = mkdtempSync(join(tmpdir(), 'fusion-backups-'));
    try {
      d = await startE2EDaemon({
        roster: builtinRoster({ candidates: { 1: slowCandidate('content-search', 60_000) } }),
        maintenance: { retentionDays: 0, retentionIntervalMs: 300, backupIntervalMs: 300, backupKeep: 2, backupDir, reaperIntervalMs: 0, staleSweepIntervalMs: 0 },
      });
      const { taskId: running } = await d.submit();
      await waitFor('the task to run', async () => (await d!.daemon.store.getTask(running))?.state === 'candidates_running');
      // An old finished task, straight into the store.
      const store = d.daemon.store;
      const input = canonicalJson({ x: 1 });
      await store.createTask({ id: 'investigate-old', workflow: 'investigate', repoDir: d.repo, canonicalInput: input, canonicalInputSha256: sha256Hex(input), budgetPlan: '{}', options: {}, callerUid: null });
      await store.transitionTask('investigate-old', 'initializing', 'failed', { error: { code: 'child_failed', message: 'old', state: 'initializing' } });

      await waitFor('retention to delete the old task', async () => (await store.getTask('investigate-old')) === null, 20_000);
      // Several backups ran; only the newest two are kept, each a complete database.
      const backups = await waitFor('backups to rotate', () => {
        const files = readdirSync(backupDir).filter((f) => /^fusion-\d{8}T\d{9}Z$/.test(f));
        const runs = d!.logs.lines().filter((l) => l.msg === 'backup written').length;
        return runs >= 3 && files.length === 2 ? files : undefined;
      }, 20_000);
      const db = await SqliteDb.open(join(backupDir, backups.sort().at(-1)!, 'fusion.db'), silentLogger());
      try {
        expect(await db.get<{ n: number }>("SELECT COUNT(*) AS n FROM tasks WHERE id = ?", [running])).toEqual({ n: 1 });
      } finally {
        await db.close();
      }
      // The in-flight task: still there, still running, its directory intact.
      expect((await store.getTask(running))?.state).toBe('candidates_running');
      expect(existsSync(join(d.home, 'tasks', running))).toBe(true);
      // Every run is logged.
      const finished = d.logs.lines().filter((l) => l.msg === 'maintenance job finished').map((l) => l.job);
      expect(finished).toContain('retention');
      expect(finished).toContain('backup');
      await d.client.call('POST', `/v1/tasks/${running}/cancel`);
    } finally {
      rmSync(backupDir, { recursive: true, force: true });
    }
  }, 60_000);
});

const dockerStatus = await (async () => {
  try {
    const docker = new Docker({ socketPath: '/var/run/docker.sock' });
    await docker.ping();
    await docker.getImage(CHILD_IMAGE).inspect();
    return { ok: true };
  } catch (err) {
    return { ok: false, reason: (err as Error).message };
  }
})();

describe('orphan reaper', () => {
  describeBackend('docker engine with the child image', dockerStatus, () => {
    it('removes a container a killed daemon of this data directory left running, under a bwrap daemon', async () => {
      const home = mkdtempSync(join(tmpdir(), 'fusion-reaper-home-'));
      const docker = new Docker({ socketPath: '/var/run/docker.sock' });
      let daemon: Daemon | undefined;
      const logs = captureLogs();
      try {
        daemon = await startDaemon(buildConfig({ home, socketPath: join(home, 'fusion.sock'), sandbox: 'bwrap' }), {
          log: logs.log,
          maintenance: { reaperIntervalMs: 300, retentionIntervalMs: 0, backupIntervalMs: 0, staleSweepIntervalMs: 0 },
        });
        // What a killed daemon of this home leaves: a labelled sandbox container still running.
        const owner = `daemon-${createHash('sha256').update(home).digest('hex').slice(0, 12)}`;
        const container = await docker.createContainer({
          Image: CHILD_IMAGE,
          Cmd: ['node', '-e', 'setTimeout(() => {}, 600000)'],
          Labels: { [LABELS.sandbox]: '1', [LABELS.owner]: owner, [LABELS.taskId]: 'investigate-killed', [LABELS.attempt]: 'candidate-1.attempt-1' },
          HostConfig: { NetworkMode: 'none' },
        });
        await container.start();
        expect((await container.inspect()).State.Running).toBe(true);
        await waitFor('the reaper to remove the container', async () => {
          try {
            await container.inspect();
            return false;
          } catch (err) {
            return (err as { statusCode?: number }).statusCode === 404;
          }
        }, 20_000, 200);
        expect(logs.lines().some((l) => l.msg === 'orphan sandbox container removed' && l.taskId === 'investigate-killed')).toBe(true);
      } finally {
        await daemon?.close();
        const left = await docker.listContainers({ all: true, filters: JSON.stringify({ label: [`${LABELS.taskId}=investigate-killed`] }) });
        for (const c of left) await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
        rmSync(home, { recursive: true, force: true });
      }
    }, 60_000);
  });
});
