/**
 * Repository bundles in cluster mode (docs/operations.md#cluster-mode), real PostgreSQL, real
 * Redis, real bwrap: daemon A receives two tasks and packs their repositories, then the
 * repositories are removed from disk and A dies without having fetched either bundle (its fetch
 * is held). Daemon B runs both: the first over its verified bundle, to a verified result whose
 * sealed record names the digest; the second, whose bundle bytes were changed in PostgreSQL
 * after submission, is refused with bundle_changed and nothing of it ran.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { FusionClient } from '../../../src/client/index.js';
import { openPgStore } from '../../../src/store/pg-store.js';
import { createLogger } from '../../../src/log.js';
import { readMembers } from '../../../src/audit/tar-members.js';
import { REFILL_ARGS, copyFixtureRepo, describeWithBwrap } from '../workflow/helpers.js';
import { spawnClusterDaemon, useClusterEngines } from './helpers.js';

const engines = useClusterEngines();
const { cleanups } = engines;

describeWithBwrap('cluster: repository bundles', () => {
  it('a task runs on another daemon over its bundle after the repository is gone; a changed bundle is refused and nothing runs', async () => {
    if (!engines.ready) return;
    const databaseUrl = await engines.pg().createDatabase();
    const good = copyFixtureRepo();
    const changed = copyFixtureRepo();
    writeFileSync(join(changed.repo, 'NOTES.md'), 'another tree, another digest\n');
    cleanups.push(() => rmSync(good.root, { recursive: true, force: true }), () => rmSync(changed.root, { recursive: true, force: true }));

    const a = await spawnClusterDaemon('a', databaseUrl, engines.redisUrl(), 0, cleanups, { FUSION_E2E_HOLD_BUNDLES: '1' });
    const viaA = new FusionClient(a.socket);
    const submit = async (repo: string): Promise<string> => ((await viaA.call('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo })) as { taskId: string }).taskId;
    const okId = await submit(good.repo);
    const changedId = await submit(changed.repo);
    // The receipt means the bundle is committed: the submitter's checkout is no longer needed.
    rmSync(good.root, { recursive: true, force: true });
    rmSync(changed.root, { recursive: true, force: true });

    const store = await openPgStore({ url: databaseUrl, log: createLogger({ level: 'silent' }), maxConnections: 2 });
    try {
      const okDigest = (await store.getTask(okId))!.bundleDigest;
      const changedDigest = (await store.getTask(changedId))!.bundleDigest;
      expect(okDigest).toMatch(/^[0-9a-f]{64}$/u);
      expect(changedDigest).toMatch(/^[0-9a-f]{64}$/u);
      expect(changedDigest).not.toBe(okDigest);
      // Someone with database access changes the second bundle's bytes before any worker fetched it.
      const bundle = (await store.getRepoBundle(changedDigest!))!;
      const tampered = Buffer.from(bundle.data);
      const at = tampered.length >> 1;
      tampered[at] = tampered[at]! ^ 0x20;
      await store.db.run('UPDATE repo_bundles SET data = ? WHERE digest = ?', [tampered, changedDigest]);

      a.proc.kill('SIGKILL');
      await a.exited;
      const b = await spawnClusterDaemon('b', databaseUrl, engines.redisUrl(), 0, cleanups);
      const viaB = new FusionClient(b.socket);

      const waitTerminal = async (id: string): Promise<{ state: string; error: { code: string } | null }> => {
        const waited = (await viaB.call('GET', `/v1/tasks/${id}/wait?timeoutMs=120000`)) as { terminal: boolean; task: { state: string; error: { code: string } | null } };
        expect(waited.terminal, id).toBe(true);
        return waited.task;
      };
      const okTask = await waitTerminal(okId);
      expect(okTask.state).toBe('completed');
      const result = (await viaB.call('GET', `/v1/tasks/${okId}/result`)) as { answer: { present: boolean; verified?: boolean } };
      expect(result.answer).toMatchObject({ present: true, verified: true });
      const ranBy = (await store.listEvents(okId)).map((e) => e.data.daemon).filter((d) => typeof d === 'string');
      expect(ranBy.at(-1)).toBe('b');
      // The sealed record names the bundle the task ran over.
      const tarball = (await store.getTaskTarball(okId))!;
      const taskJson = JSON.parse(readMembers(tarball.data).find((m) => m.name === 'task.json')!.data.toString('utf8')) as { bundle_digest?: string };
      expect(taskJson.bundle_digest).toBe(okDigest);

      const refused = await waitTerminal(changedId);
      expect(refused.state).toBe('failed');
      expect(refused.error?.code).toBe('bundle_changed');
      expect(await store.listAttempts(changedId)).toEqual([]);
    } finally {
      await store.close();
    }
  }, 240_000);
});
