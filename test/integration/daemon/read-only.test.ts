/**
 * A daemon started read-only on a full disk leaves interrupted tasks for the next start and
 * writes nothing new: its maintenance jobs must not fail those tasks (stale sweep) nor write a
 * database copy onto the full disk (backup). Read-only is forced with a reserve above any free space.
 */
import sqlite3 from 'sqlite3';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { INVESTIGATE_ARGS, ROOT, STARTED_RUNNING, startStubDaemon, stopDaemon, tempHome, waitForTask, type DaemonProc } from './helpers.js';

type Json = Record<string, any>;
let d: DaemonProc | undefined;
afterEach(async () => {
  if (d) await stopDaemon(d, 'SIGKILL');
});

it('read-only start: the stale sweep does not fail interrupted tasks and no backup is written', async () => {
  const home = tempHome();
  d = await startStubDaemon(home, 10_000);
  const receipt = (await d.client.call('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: ROOT })) as Json;
  await waitForTask(d.client, String(receipt.taskId), 'to start running', STARTED_RUNNING);
  await stopDaemon(d, 'SIGKILL');
  // Interrupted long ago: any sweep would call it stale.
  // Through the sqlite3 package the daemon uses (the sqlite3 command-line tool is not installed by set-up).
  await new Promise<void>((resolve, reject) => {
    const db = new sqlite3.Database(join(home, 'fusion.db'), (openErr) => {
      if (openErr) return reject(openErr);
      db.run("UPDATE tasks SET updated_at = '2000-01-01T00:00:00.000Z'", (err) => db.close(() => (err ? reject(err) : resolve())));
    });
  });

  d = await startStubDaemon(home, 10_000, 0, { storageReserveBytes: Number.MAX_SAFE_INTEGER });
  expect(((await d.client.call('GET', '/v1/health')) as Json).readOnly).toBe(true);
  const sweep = await d.client.raw('POST', '/v1/admin/maintenance/stale-sweep');
  expect(JSON.stringify(sweep.body)).not.toContain(String(receipt.taskId));
  const task = (await d.client.call('GET', `/v1/tasks/${String(receipt.taskId)}`)) as Json;
  expect(task.state, JSON.stringify(task)).not.toBe('failed');
  const backup = await d.client.raw('POST', '/v1/admin/maintenance/backup');
  expect(JSON.stringify(backup.body)).not.toMatch(/fusion-[^"]*\.db/);
}, 60_000);
