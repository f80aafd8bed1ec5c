/**
 * A backup someone can restore from (docs/operations.md#restore): a signed task completes, the
 * backup job runs through the admin route, the daemon stops, the backup is restored into a new
 * data directory by the documented steps, a daemon starts on it, and `fusion audit verify` of
 * the old task passes against the restored key; bg_result delivers it verified, restored elsewhere or to the path.
 */
import { chmodSync, cpSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { tempDir } from '../../helpers/temp-dir.js';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { initSigningKey } from '../../../src/audit/signing.js';
import { runCli } from '../../../src/cli/main.js';
import type { Io } from '../../../src/cli/commands.js';
import { INVESTIGATE_ARGS, ROOT, startStubDaemon, stopDaemon, type DaemonProc } from '../daemon/helpers.js';
import { waitFor } from '../../helpers/wait.js';

const scratchDir = tempDir('fusion-restore-');
const scratch = scratchDir.path;
afterAll(() => scratchDir.remove());

async function cli(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const io = { out: '', err: '', stdout: (t: string) => void (io.out += t), stderr: (t: string) => void (io.err += t), readStdin: () => '' } as Io & { out: string; err: string };
  const code = await runCli(argv, {}, io);
  return { code, out: io.out, err: io.err };
}

/** The restore steps of docs/operations.md#restore, for a backup directory and a new data directory. */
function restore(backup: string, home: string): void {
  mkdirSync(home, { mode: 0o700 });
  cpSync(join(backup, 'fusion.db'), join(home, 'fusion.db'));
  cpSync(join(backup, 'signing-key.pem'), join(home, 'signing-key.pem'));
  chmodSync(join(home, 'signing-key.pem'), 0o600);
  cpSync(join(backup, 'signing-key.pub.pem'), join(home, 'signing-key.pub.pem'));
  cpSync(join(backup, 'tasks'), join(home, 'tasks'), { recursive: true });
}

describe('backup → restore → verify', () => {
  let d: DaemonProc | undefined;
  afterAll(async () => {
    if (d) await stopDaemon(d);
  });

  it('a restored data directory starts, and the old signed task verifies offline and reads back verified', async () => {
    const home = join(scratch, 'home');
    mkdirSync(home, { mode: 0o700 });
    const key = initSigningKey(home);
    d = await startStubDaemon(home, 20);
    const receipt = await d.client.submit('investigate', INVESTIGATE_ARGS, { repo: ROOT });
    await d.client.wait(receipt.taskId, { timeoutMs: 30_000 });
    // The sealed tarball is written just after the terminal transition.
    let verified = await cli(['audit', 'verify', receipt.taskId, '--data', home]);
    await waitFor('the sealed task to verify', async () => (verified = await cli(['audit', 'verify', receipt.taskId, '--data', home])).code === 0, 20_000, 100).catch(() => undefined);
    expect(verified.code, verified.out + verified.err).toBe(0);

    const backup = await d.client.raw('POST', '/v1/admin/maintenance/backup');
    expect(backup.status, JSON.stringify(backup.body)).toBe(200);
    const summary = (backup.body as any).summary ?? backup.body;
    // Shipped off the machine, as backups should be (the default backup directory is inside the data directory).
    const dir = join(scratch, 'offsite');
    cpSync(summary.dir, dir, { recursive: true });
    expect(summary).toMatchObject({ signingKey: 'private', research: false });
    expect(summary.tasks).toBeGreaterThanOrEqual(1);
    expect(readdirSync(dir).sort()).toEqual(['backup.json', 'fusion.db', 'signing-key.pem', 'signing-key.pub.pem', 'tasks']);
    await stopDaemon(d);
    d = undefined;

    // The old disk is gone; a new data directory, somewhere else: the database and the key are
    // enough for the audit, and bg_result reads the answer from the restored task folder (the
    // row's recorded path is gone; the copy here must recompute to the committed digest).
    rmSync(home, { recursive: true, force: true });
    const restored = join(scratch, 'restored');
    restore(dir, restored);
    d = await startStubDaemon(restored, 20);
    const again = await cli(['audit', 'verify', receipt.taskId, '--data', restored]);
    expect(again.code, again.out + again.err).toBe(0);
    expect(again.out).toContain(`signed by sha256:${key.publicKeySha256} (pinned)`);
    const elsewhere = await d.client.result(receipt.taskId, { delivery: 'artifact' });
    expect(elsewhere).toMatchObject({ signed: true, answer: { present: true, verified: true, path: join(restored, 'tasks', receipt.taskId, 'result', 'answer.md') } });
    await stopDaemon(d);
    d = undefined;

    // Restored to the same path: bg_result delivers the answer, signed and verified.
    restore(dir, home);
    d = await startStubDaemon(home, 20);
    const result = await d.client.result(receipt.taskId);
    expect(result.answer.present).toBe(true);
    expect((result.answer as { header?: string }).header).toMatch(/\(verified\)/);
    expect((result as any).signed).toBe(true);
  });
});
