/**
 * The maintenance jobs against a real SQLite store and real directories: retention never
 * deletes a task whose run is in flight, the stale-task sweep fails only orphaned tasks, backups
 * rotate, and the reaper removes stale scratch and staging directories but not a live one.
 */
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { initSigningKey } from '../../../src/audit/signing.js';
import { issueKey } from '../../../src/research/api-keys.js';
import { openResearchSqliteStore } from '../../../src/store/research-sqlite-store.js';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import type { FusionError } from '../../../src/errors.js';
import { runBackup, runOrphanReaper, runRetention, runRootPidFile, runStaleTaskSweep } from '../../../src/maintenance/jobs.js';
import { maintenanceConfig, parseDuration } from '../../../src/maintenance/config.js';
import type { SqliteStore } from '../../../src/store/sqlite-store.js';
import { newTask, openStore, tempDir, type TempDir } from '../store/helpers.js';

let tmp: TempDir;
let store: SqliteStore;
beforeEach(async () => {
  tmp = await tempDir();
  store = await openStore(tmp.file);
});
afterEach(async () => {
  await store.close();
  await tmp.cleanup();
});

async function finished(state: 'failed' | 'cancelled' = 'failed'): Promise<string> {
  const t = await store.createTask(newTask());
  await store.transitionTask(t.id, 'initializing', state, state === 'failed' ? { error: { code: 'child_failed', message: 'x', state: 'initializing' } } : {});
  return t.id;
}

describe('retention', () => {
  it('deletes old terminal tasks with their directory and tarball, never one still in flight or a running task', async () => {
    const tasksDir = join(tmp.dir, 'tasks');
    const old = await finished();
    const settling = await finished('cancelled');
    const active = (await store.createTask(newTask())).id;
    for (const id of [old, settling, active]) mkdirSync(join(tasksDir, id), { recursive: true });
    await store.saveTaskTarball({ taskId: old, sha256: 'a'.repeat(64), bytes: 1, manifestSha256: 'b'.repeat(64), signature: null, publicKeySha256: null, createdAt: new Date().toISOString(), data: Buffer.from('x') });
    const out = await runRetention({ store, tasksDir, olderThanDays: 0, running: () => new Set([settling, active]), now: Date.now() + 1000, log: silentLogger() });
    expect(out).toEqual({ deleted: [old], kept: 1 });
    expect(await store.getTask(old)).toBeNull();
    expect(await store.getTaskTarball(old)).toBeNull();
    expect(existsSync(join(tasksDir, old))).toBe(false);
    expect(await store.getTask(settling)).not.toBeNull();
    expect(existsSync(join(tasksDir, settling))).toBe(true);
    expect((await store.getTask(active))?.state).toBe('initializing');
    // Younger than the window: kept.
    expect((await runRetention({ store, tasksDir, olderThanDays: 1, running: () => new Set(), log: silentLogger() })).deleted).toEqual([]);
  });
});

describe('stale-task sweep', () => {
  it('fails non-terminal tasks no run owns once they are older than the threshold', async () => {
    const orphan = (await store.createTask(newTask())).id;
    const owned = (await store.createTask(newTask())).id;
    const failedWith: Array<[string, FusionError]> = [];
    const fail = async (id: string, err: FusionError): Promise<void> => {
      failedWith.push([id, err]);
    };
    const early = await runStaleTaskSweep({ store, running: () => new Set([owned]), fail, staleAfterMs: 60_000, log: silentLogger() });
    expect(early.failed).toEqual([]);
    const late = await runStaleTaskSweep({ store, running: () => new Set([owned]), fail, staleAfterMs: 60_000, now: Date.now() + 120_000, log: silentLogger() });
    expect(late.failed).toEqual([orphan]);
    expect(failedWith[0]![1].code).toBe('supervisor_restarted');
  });
});

describe('backup', () => {
  it('writes a consistent online copy and keeps only the newest N (older single-file backups rotate too; a half-written one is removed)', async () => {
    const dir = join(tmp.dir, 'backups');
    mkdirSync(dir);
    writeFileSync(join(dir, 'fusion-20250101T000000000Z.db'), 'old format');
    mkdirSync(join(dir, 'fusion-20250101T000001000Z.partial'));
    writeFileSync(join(dir, 'unrelated.txt'), 'kept');
    await store.createTask(newTask());
    for (let i = 0; i < 4; i += 1) {
      await runBackup({ store, dir, keep: 2, now: new Date(Date.UTC(2026, 0, 1, 0, 0, i)), log: silentLogger() });
    }
    const files = readdirSync(dir).sort();
    expect(files).toEqual(['fusion-20260101T000002000Z', 'fusion-20260101T000003000Z', 'unrelated.txt']);
    expect(readdirSync(join(dir, files[1]!)).sort()).toEqual(['backup.json', 'fusion.db']);
    const copy = await openStore(join(dir, files[1]!, 'fusion.db'));
    try {
      expect(await copy.listTasks()).toHaveLength(1);
    } finally {
      await copy.close();
    }
  });
});

describe('backup directory', () => {
  // Attack: another uid who may write in the backup directory plants entries named like newer
  // backups (each real backup was then pruned the moment it was written), or swaps names while
  // root deletes and renames there. The daemon refuses such a directory, as it does a socket's.
  it('refuses a backup directory others may write in (planted names never make it prune the real backup), or one another uid owns', async () => {
    const dir = join(tmp.dir, 'backups-open');
    mkdirSync(dir);
    chmodSync(dir, 0o777);
    for (const stamp of ['99991231T235959998Z', '99991231T235959999Z']) {
      mkdirSync(join(dir, `fusion-${stamp}`));
      chownSync(join(dir, `fusion-${stamp}`), 65534, 65534);
    }
    const err = await runBackup({ store, dir, keep: 2, log: silentLogger() }).then(() => undefined, (e: FusionError) => e);
    expect({ code: err?.code, message: err?.message }).toMatchObject({ code: 'invalid_config', message: expect.stringContaining('chmod go-w') });
    expect(readdirSync(dir).sort()).toEqual(['fusion-99991231T235959998Z', 'fusion-99991231T235959999Z']);
    const theirs = join(tmp.dir, 'backups-theirs');
    mkdirSync(theirs, { mode: 0o700 });
    chownSync(theirs, 65534, 65534);
    const owned = await runBackup({ store, dir: theirs, keep: 2, log: silentLogger() }).then(() => undefined, (e: FusionError) => e);
    expect(owned?.code).toBe('invalid_config');
    expect(readdirSync(theirs)).toEqual([]);
  });
});

describe('backup file mode', () => {
  it('a backup is private (0700, its files 0600) like the data directory, under the usual umask and in an open directory', async () => {
    const dir = join(tmp.dir, 'backups-mode');
    mkdirSync(dir, { mode: 0o755 });
    const home = join(tmp.dir, 'home');
    const tasksDir = join(home, 'tasks');
    mkdirSync(join(tasksDir, 'investigate-done', 'result'), { recursive: true });
    writeFileSync(join(tasksDir, 'investigate-done', 'result', 'answer.md'), 'answer\n', { mode: 0o600 });
    mkdirSync(join(tasksDir, 'investigate-running'), { recursive: true });
    writeFileSync(join(tasksDir, 'investigate-running', 'partial'), 'x');
    symlinkSync('/etc/passwd', join(tasksDir, 'investigate-done', 'result', 'link'));
    initSigningKey(home);
    const summary = await runBackup({ store, dir, keep: 2, log: silentLogger(), home, tasksDir, running: () => new Set(['investigate-running']) });
    expect(summary).toMatchObject({ signingKey: 'private', tasks: 1, research: false });
    expect(statSync(summary.dir).mode & 0o777).toBe(0o700);
    for (const f of ['fusion.db', 'backup.json', 'signing-key.pem']) expect(statSync(join(summary.dir, f)).mode & 0o777, f).toBe(0o600);
    // The task folders: the finished one (no symlink), not the one still running.
    expect(readdirSync(join(summary.dir, 'tasks'))).toEqual(['investigate-done']);
    expect(readdirSync(join(summary.dir, 'tasks', 'investigate-done', 'result'))).toEqual(['answer.md']);
    expect(JSON.parse(readFileSync(join(summary.dir, 'backup.json'), 'utf8'))).toMatchObject({ format: 1, database: 'fusion.db', researchDatabase: null, signingKey: 'private', tasks: 1 });
    // FUSION_BACKUP_SIGNING_KEY=public: the public key only.
    const pub = await runBackup({ store, dir, keep: 2, log: silentLogger(), home, signingKey: 'public', now: new Date(Date.now() + 1000) });
    expect(readdirSync(pub.dir).sort()).toEqual(['backup.json', 'fusion.db', 'signing-key.pub.pem']);
  });

  it('a separate research database (--research-db) is backed up beside the main one', async () => {
    const research = await openResearchSqliteStore({ file: join(tmp.dir, 'research.db'), log: silentLogger() });
    try {
      const { record } = await issueKey(research, 'ws_1', 'workspace');
      const summary = await runBackup({ store, dir: join(tmp.dir, 'backups-research'), keep: 1, log: silentLogger(), research: { backupTo: (f) => research.backupTo!(f) } });
      expect(summary.research).toBe(true);
      const copy = await openResearchSqliteStore({ file: join(summary.dir, 'research.db'), log: silentLogger() });
      try {
        expect((await copy.getKey(record.id))?.workspaceId).toBe('ws_1');
      } finally {
        await copy.close();
      }
    } finally {
      await research.close();
    }
  });

  it('FUSION_BACKUP_SIGNING_KEY is private (default) or public', () => {
    expect(maintenanceConfig('/h', {}).backupSigningKey).toBe('private');
    expect(maintenanceConfig('/h', { FUSION_BACKUP_SIGNING_KEY: 'public' }).backupSigningKey).toBe('public');
    expect(() => maintenanceConfig('/h', { FUSION_BACKUP_SIGNING_KEY: 'both' })).toThrow(/FUSION_BACKUP_SIGNING_KEY must be private or public/);
  });
});

describe('orphan reaper (directories)', () => {
  it('removes stale Docker scratch dirs and dead run roots, keeps fresh ones, live roots and its own', async () => {
    const tmpDir = join(tmp.dir, 'tmp');
    mkdirSync(tmpDir);
    const uid = process.getuid?.() ?? 0;
    const old = (Date.now() - 3 * 3_600_000) / 1000;
    const mk = (name: string, age = old): string => {
      const p = join(tmpDir, name);
      mkdirSync(p);
      writeFileSync(join(p, 'f'), 'x');
      utimesSync(p, age, age);
      return p;
    };
    const staleScratch = mk('fusion-docker-abc123');
    const freshScratch = mk('fusion-docker-def456', Date.now() / 1000);
    const deadRoot = mk(`fsn-${uid}-0000dead`);
    const liveRoot = mk(`fsn-${uid}-0000a11e`);
    writeFileSync(runRootPidFile(liveRoot), `${process.pid}\n`);
    const ownRoot = mk(`fsn-${uid}-00000000`);
    const cgroupRoot = join(tmp.dir, 'cgroup');
    const leftover = join(cgroupRoot, 'system.slice', 'fusion-sandboxes', 'sbx-1');
    mkdirSync(leftover, { recursive: true });
    utimesSync(leftover, old, old);
    utimesSync(join(cgroupRoot, 'system.slice', 'fusion-sandboxes'), old, old);
    const reaped: Array<Set<string>> = [];
    const out = await runOrphanReaper({
      reapContainers: async (live) => {
        reaped.push(live);
        return ['c0ffee'];
      },
      running: () => new Set(['investigate-running']),
      tmpDir, runRoot: ownRoot, staleAfterMs: 3_600_000, cgroupRoots: [cgroupRoot], log: silentLogger(),
    });
    expect(reaped[0]).toEqual(new Set(['investigate-running']));
    expect(out.containers).toEqual(['c0ffee']);
    expect(out.dockerScratch).toEqual([staleScratch]);
    expect(out.stagingRoots).toEqual([deadRoot]);
    // The empty per-sandbox cgroup goes; its group was just touched by that removal, so it stays
    // until it has been idle for the whole threshold (a launcher may be about to use it).
    expect(out.cgroups).toEqual([leftover]);
    expect(existsSync(join(cgroupRoot, 'system.slice', 'fusion-sandboxes'))).toBe(true);
    expect(existsSync(freshScratch) && existsSync(liveRoot) && existsSync(ownRoot)).toBe(true);
  });
});

describe('maintenance config', () => {
  it('reads intervals with units and refuses nonsense', () => {
    expect(parseDuration('X', '90s')).toBe(90_000);
    expect(parseDuration('X', '1500')).toBe(1500);
    const c = maintenanceConfig('/h', { FUSION_RETENTION_DAYS: '7', FUSION_BACKUP_INTERVAL: '0', FUSION_BACKUP_KEEP: '3' });
    expect(c).toMatchObject({ retentionDays: 7, backupIntervalMs: 0, backupKeep: 3, backupDir: '/h/backups', reaperIntervalMs: 600_000 });
    expect(() => maintenanceConfig('/h', { FUSION_REAPER_INTERVAL: 'soon' })).toThrow(/FUSION_REAPER_INTERVAL must be a duration/);
  });
});
