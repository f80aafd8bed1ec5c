/**
 * Multi-host sealing (docs/operations.md#cluster-mode), real PostgreSQL and real Redis: daemon A
 * runs a task until at least one candidate attempt committed, then is SIGKILLed; daemon B (its
 * own data directory: it never reads A's disk) resumes the task and seals it. The sealed task
 * tarball holds every attempt, A's included (from the attempt archives in the database), and
 * `fusion audit export` / `verify` read it from PostgreSQL (--database-url) and verify it offline.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { FusionClient } from '../../../src/client/index.js';
import { runCli } from '../../../src/cli/main.js';
import { openPgStore, type PgStore } from '../../../src/store/pg-store.js';
import { createLogger } from '../../../src/log.js';
import { readMembers } from '../../../src/audit/tar-members.js';
import { attemptArchiveKey } from '../../../src/audit/attempt-archive.js';
import { REFILL_ARGS, copyFixtureRepo, describeWithBwrap, waitFor } from '../workflow/helpers.js';
import { spawnClusterDaemon, useClusterEngines } from './helpers.js';

const engines = useClusterEngines();
const { cleanups } = engines;

async function cli(argv: string[], env: Record<string, string>): Promise<{ code: number; out: string; err: string }> {
  const io = { out: '', err: '', stdout: (t: string) => void (io.out += t), stderr: (t: string) => void (io.err += t), readStdin: () => '' };
  const code = await runCli(argv, env, io);
  return { code, out: io.out, err: io.err };
}

describeWithBwrap('cluster: a task resumed on another daemon is sealed with every attempt', () => {
  it('B seals A\'s committed attempts from the database; export/verify read PostgreSQL', async () => {
    if (!engines.ready) return;
    const databaseUrl = await engines.pg().createDatabase();
    const fixture = copyFixtureRepo();
    cleanups.push(() => rmSync(fixture.root, { recursive: true, force: true }));
    const scratch = mkdtempSync(join(tmpdir(), 'fusion-cluster-seal-'));
    cleanups.push(() => rmSync(scratch, { recursive: true, force: true }));
    const store: PgStore = await openPgStore({ url: databaseUrl, log: createLogger({ level: 'silent' }), maxConnections: 2 });
    cleanups.push(() => store.close());

    // A alone first, so it takes the job; its first candidate sleeps until A is killed.
    const a = await spawnClusterDaemon('a', databaseUrl, engines.redisUrl(), 120_000, cleanups);
    const receipt = (await new FusionClient(a.socket).call('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo: fixture.repo })) as { taskId: string };
    const id = receipt.taskId;
    // The other two candidates commit (each with its archive) while the first one sleeps.
    const committedByA = await waitFor('two candidate attempts committed by daemon a', async () => {
      const done = (await store.listAttempts(id)).filter((x) => x.stage.startsWith('candidate-') && x.status === 'succeeded');
      return done.length >= 2 ? done : undefined;
    }, 90_000, 200);
    for (const x of committedByA) expect(await store.getCheckpoint(id, attemptArchiveKey(x.stage, x.attempt)), `${x.stage} archive`).not.toBeNull();
    a.proc.kill('SIGKILL');
    await a.exited;

    const b = await spawnClusterDaemon('b', databaseUrl, engines.redisUrl(), 0, cleanups);
    const viaB = new FusionClient(b.socket);
    const waited = (await viaB.call('GET', `/v1/tasks/${id}/wait?timeoutMs=120000`)) as { task: { state: string } };
    expect(waited.task.state).toBe('completed');
    const events = await store.listEvents(id);
    expect(events.map((e) => e.data.daemon).filter((d) => typeof d === 'string')).toEqual(expect.arrayContaining(['a', 'b']));
    await waitFor('the task tarball sealed', () => store.getTaskTarball(id).then((t) => t ?? undefined), 30_000, 100);
    // The survivor verifies the result against the sealed tarball (every attempt the metadata names).
    const result = (await viaB.call('GET', `/v1/tasks/${id}/result`)) as { answer: { verified?: boolean } };
    expect(result.answer.verified).toBe(true);

    // Exported from PostgreSQL (no data directory), verified offline from the file.
    const env = { FUSION_HOME: join(scratch, 'no-home') };
    const file = join(scratch, 'task.tar');
    const exported = await cli(['audit', 'export', id, '-o', file, '--database-url', databaseUrl], env);
    expect(exported.code, exported.err).toBe(0);
    const verified = await cli(['audit', 'verify', file], env);
    expect(verified.code, verified.out).toBe(0);
    expect(verified.out).toContain(`verified: task ${id} (completed)`);
    // By id, through FUSION_DATABASE_URL.
    const byId = await cli(['audit', 'verify', id], { ...env, FUSION_DATABASE_URL: databaseUrl });
    expect(byId.code, byId.out).toBe(0);

    // Every attempt with a tarball is in it, A's included, and A's were not on B's disk.
    const members = readMembers((await store.getTaskTarball(id))!.data).map((m) => m.name);
    const attempts = await store.listAttempts(id);
    for (const x of attempts.filter((r) => r.tarballSha256 !== null)) {
      expect(members.some((n) => n.startsWith(`attempts/${x.stage}.attempt-${x.attempt}/`)), `${x.stage}#${x.attempt}`).toBe(true);
    }
    for (const x of committedByA) {
      expect(x.tarballPath!.startsWith(a.home)).toBe(true);
      expect(members).toContain(`attempts/${x.stage}.attempt-${x.attempt}.replay.json`);
    }
    // Once sealed, the archives are dropped with the other checkpoints (the tarball holds them).
    await waitFor('archives dropped', async () => ((await store.getCheckpoint(id, attemptArchiveKey(committedByA[0]!.stage, committedByA[0]!.attempt))) === null) || undefined, 10_000, 100);
  }, 300_000);
});
