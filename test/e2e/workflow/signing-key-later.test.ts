/**
 * A signing key created after tasks were sealed unsigned (docs/security.md#signing-later),
 * through the real daemon, real bwrap sandboxes and the real CLI, on one data directory:
 * a task sealed with no key stays readable and verifiable as "unsigned (sealed before the
 * signing key)" after the key is created and the daemon restarted; a task running when the
 * daemon stopped is sealed signed after the restart; a new task is signed; a new task's tarball
 * with its signature stripped is refused by bg_result and by `fusion audit verify` (`make verify`),
 * whose message names where the key came from instead of claiming one was given.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runCli } from '../../../src/cli/main.js';
import type { Io } from '../../../src/cli/commands.js';
import { packMembers, readMembers } from '../../../src/audit/tar-members.js';
import { buildManifest, MANIFEST_MEMBER, SIGNATURE_MEMBER } from '../../../src/audit/task-tarball.js';
import { UNSIGNED_BEFORE_KEY_FILE } from '../../../src/audit/unsigned-before-key.js';
import { sha256Hex } from '../../../src/contracts/canonical.js';
import { SqliteDb } from '../../../src/store/sqlite-db.js';
import { silentLogger } from '../../../src/log.js';
import { builtin, builtinRoster, copyFixtureRepo, describeWithBwrap, latch, sleep, startE2EDaemon, wrapProvider, type E2EDaemon } from './helpers.js';

async function cli(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const io = { out: '', err: '', stdout: (t: string) => void (io.out += t), stderr: (t: string) => void (io.err += t), readStdin: () => '' } satisfies Io & { out: string; err: string };
  const code = await runCli(argv, {}, io).catch((e: unknown) => {
    io.err += (e as Error).message;
    return -1;
  });
  return { code, out: io.out, err: io.err };
}

/** Replaces a task's stored tarball (kept uncompressed, as rows sealed before compression are). */
async function replaceTarball(home: string, taskId: string, data: Buffer, manifestSha256: string): Promise<void> {
  const db = await SqliteDb.open(join(home, 'fusion.db'), silentLogger());
  try {
    await db.run('UPDATE task_tarballs SET sha256 = ?, bytes = ?, manifest_sha256 = ?, signature = NULL, public_key_sha256 = NULL, data = ? WHERE task_id = ?', [
      sha256Hex(data), data.length, manifestSha256, data, taskId,
    ]);
  } finally {
    await db.close();
  }
}

/** The task's members, re-sealed without a signature after `edit` (an attacker without the key). */
async function unsignedCopy(sealed: Buffer, taskId: string, edit: (m: { name: string; data: Buffer }) => Buffer = (m) => m.data): Promise<{ data: Buffer; manifestSha256: string }> {
  const body = readMembers(sealed).filter((m) => m.name !== MANIFEST_MEMBER && m.name !== SIGNATURE_MEMBER).map((m) => ({ name: m.name, data: edit(m) }));
  const manifest = buildManifest(taskId, 'completed', body);
  return { data: await packMembers([...body, { name: MANIFEST_MEMBER, data: manifest }]), manifestSha256: sha256Hex(manifest) };
}

describeWithBwrap('a signing key created after tasks were sealed unsigned', () => {
  const fixture = copyFixtureRepo();
  const home = mkdtempSync(join(tmpdir(), 'fusion-e2e-home-'));
  let first: E2EDaemon | undefined;
  let second: E2EDaemon | undefined;
  let earlier = '';
  let interrupted = '';
  let refusedWhileRunning = { code: 0, out: '', err: '' };
  let init = { code: 0, out: '', err: '' };

  beforeAll(async () => {
    // Candidates answer at once until `slow` is set; then they sleep until the daemon stops.
    let slow = false;
    const entered = latch(1);
    const candidate = (strategy: 'content-search' | 'path-search' | 'definition-search') =>
      wrapProvider(builtin(strategy), async (req, inner) => {
        if (slow && req.role === 'candidate') {
          entered.mark();
          await sleep(120_000, req.signal);
        }
        return inner.complete(req);
      });
    first = await startE2EDaemon({ reuse: { home, repo: fixture.repo }, roster: builtinRoster({ candidates: { 1: candidate('content-search'), 2: candidate('path-search'), 3: candidate('definition-search') } }) });
    earlier = (await first.submit()).taskId;
    expect((await first.waitTerminal(earlier)).state).toBe('completed');
    slow = true;
    interrupted = (await first.submit()).taskId;
    await entered.done;
    refusedWhileRunning = await cli(['keys', 'signing-init', '--data', home]);
    await first.close();
    first = undefined;
    init = await cli(['keys', 'signing-init', '--data', home]);
    second = await startE2EDaemon({ reuse: { home, repo: fixture.repo } });
  }, 240_000);

  afterAll(async () => {
    await first?.close();
    await second?.close();
    rmSync(home, { recursive: true, force: true });
    rmSync(fixture.root, { recursive: true, force: true });
  });

  it('signing-init refuses while a daemon runs on the data directory, naming it, and creates nothing', () => {
    expect(refusedWhileRunning.code).not.toBe(0);
    expect(refusedWhileRunning.err).toContain(`the fusion daemon pid ${process.pid} runs on ${home}: stop it, run fusion keys signing-init again, then start it`);
    // The refusal came before anything was written.
    expect(init.code, init.err).toBe(0);
  });

  it('signing-init says what changes: which tasks stay unsigned, that the daemon must start, where the public key is', () => {
    expect(init.err).toContain(`public key ${join(home, 'signing-key.pub.pem')}`);
    expect(init.err).toContain('1 task(s) sealed unsigned before this key stay unsigned');
    expect(init.err).toMatch(/fusion audit verify reports them as "unsigned \(sealed before the signing key was created on \d{4}-\d\d-\d\dT/);
    expect(init.err).toContain(`the list is ${join(home, UNSIGNED_BEFORE_KEY_FILE)}, signed by the key`);
    expect(init.err).toContain('start the daemon of data directory ');
    expect(init.err).toContain('the 1 task(s) not yet ended are sealed signed when they end');
    expect(existsSync(join(home, UNSIGNED_BEFORE_KEY_FILE))).toBe(true);
  });

  it('the earlier task stays readable, as unsigned sealed before the key', async () => {
    const keyCreatedAt = (JSON.parse(readFileSync(join(home, UNSIGNED_BEFORE_KEY_FILE), 'utf8')) as { created_at: string }).created_at;
    const result = (await second!.client.call('GET', `/v1/tasks/${earlier}/result`)) as Record<string, any>;
    expect(result.answer.present).toBe(true);
    expect(result.answer.header).toMatch(/\(verified\)\.$/);
    expect(result.signed).toBe(false);
    expect(result.sealedBeforeKey).toBe(keyCreatedAt);
  });

  it('make verify (audit verify ID --replay) passes for the earlier task as unsigned, sealed before the key; pinned with --pubkey too', async () => {
    const verify = await cli(['audit', 'verify', earlier, '--replay', '--data', home]);
    expect(verify.code, verify.out + verify.err).toBe(0);
    expect(verify.out).toMatch(/^ok {3}signature: none; sealed before the signing key was created/m);
    expect(verify.out).toMatch(/verified: task \S+ \(completed\), \d+ members, UNSIGNED \(sealed before the signing key was created on \d{4}-/);
    const pinned = await cli(['audit', 'verify', earlier, '--data', home, '--pubkey', join(home, 'signing-key.pub.pem')]);
    expect(pinned.code, pinned.out).toBe(0);
  });

  it('the task running when the daemon stopped is resumed and sealed signed; a new task is signed', async () => {
    expect((await second!.waitTerminal(interrupted)).state).toBe('completed');
    const resumed = (await second!.client.call('GET', `/v1/tasks/${interrupted}/result`)) as Record<string, any>;
    expect(resumed.signed).toBe(true);
    const fresh = (await second!.submit()).taskId;
    expect((await second!.waitTerminal(fresh)).state).toBe('completed');
    expect(((await second!.client.call('GET', `/v1/tasks/${fresh}/result`)) as Record<string, any>).signed).toBe(true);
    expect((await cli(['audit', 'verify', fresh, '--data', home])).out).toMatch(/signed by sha256:[0-9a-f]{64} \(pinned\)/);

    // The signature stripped from the new task's record: not on the list, so refused.
    const stripped = await unsignedCopy((await second!.daemon.store.getTaskTarball(fresh))!.data, fresh);
    await replaceTarball(home, fresh, stripped.data, stripped.manifestSha256);
    const err = (await second!.client.call('GET', `/v1/tasks/${fresh}/result`).catch((e: unknown) => e)) as { code?: string; message?: string };
    expect(err.code).toBe('artifact_error');
    expect(err.message).toMatch(/the task tarball is not signed, and the task is not among the tasks sealed before the signing key was created/);
    const verify = await cli(['audit', 'verify', fresh, '--data', home]);
    expect(verify.code).toBe(1);
    expect(verify.out).toContain(`BROKEN: signature.json: signature.json is missing: the tarball is not signed, but it is verified against the signing key of the data directory ${home} (no --pubkey was given), and the task is not among the tasks sealed before the signing key was created`);
    expect(verify.out).not.toMatch(/public key was given/);
  }, 180_000);

  it('an earlier task whose unsigned tarball changed after the key recorded it is refused', async () => {
    const forged = await unsignedCopy((await second!.daemon.store.getTaskTarball(earlier))!.data, earlier, (m) => (m.name === 'events.json' ? Buffer.from('[]\n') : m.data));
    await replaceTarball(home, earlier, forged.data, forged.manifestSha256);
    const err = (await second!.client.call('GET', `/v1/tasks/${earlier}/result`).catch((e: unknown) => e)) as { code?: string; message?: string };
    expect(err.code).toBe('artifact_error');
    expect(err.message).toMatch(/differs from the one recorded when the signing key was created/);
    const verify = await cli(['audit', 'verify', earlier, '--data', home]);
    expect(verify.code).toBe(1);
    expect(verify.out).toMatch(/^BROKEN: signature\.json: .*differs from the one recorded when the signing key was created/m);
  });

  it('a list changed after the key signed it stops the daemon from starting', async () => {
    const file = join(home, UNSIGNED_BEFORE_KEY_FILE);
    const list = JSON.parse(readFileSync(file, 'utf8')) as { tasks: Array<{ task_id: string; tarball_sha256: string }> };
    writeFileSync(file, `${JSON.stringify({ ...list, tasks: [...list.tasks, { task_id: 'investigate-00000000000000000000000000000000', tarball_sha256: 'a'.repeat(64) }] })}\n`);
    await second!.close();
    second = undefined;
    await expect(startE2EDaemon({ reuse: { home, repo: fixture.repo } })).rejects.toThrow(/does not verify: its signature is not the signing key's over its content/);
  });
});
