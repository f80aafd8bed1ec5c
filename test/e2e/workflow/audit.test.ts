/**
 * Provable audit through the real daemon and real bwrap sandboxes: one sealed tarball per task
 * in SQLite at every terminal state, Ed25519 signatures checked by bg_result, replay of every
 * repository tool call before evaluation, and `fusion audit export` / `verify` offline.
 */
import { chmodSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../../src/cli/main.js';
import type { Io } from '../../../src/cli/commands.js';
import { initSigningKey } from '../../../src/audit/signing.js';
import { readMembers, packMembers } from '../../../src/audit/tar-members.js';
import { verifyTaskTarball } from '../../../src/audit/offline-verify.js';
import { canonicalJson, sha256Hex } from '../../../src/contracts/canonical.js';
import { SqliteDb } from '../../../src/store/sqlite-db.js';
import { silentLogger } from '../../../src/log.js';
import type { ModelProvider } from '../../../src/models/port.js';
import { RIGHT_FILE, builtin, builtinRoster, describeWithBwrap, latch, slowCandidate, startE2EDaemon, wrapProvider, type E2EDaemon } from './helpers.js';
import { within } from '../../helpers/wait.js';
import { CANDIDATE_REPLAY_LABEL } from '../../../src/workflow/replay-attempt.js';

function captureIo(): Io & { out: string; err: string } {
  const io = { out: '', err: '', stdout: (t: string) => void (io.out += t), stderr: (t: string) => void (io.err += t), readStdin: () => '' };
  return io;
}

async function cli(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const io = captureIo();
  const code = await runCli(argv, {}, io);
  return { code, out: io.out, err: io.err };
}

const scratch = mkdtempSync(join(tmpdir(), 'fusion-audit-e2e-'));
// The sandbox uid must be able to reach a repository copied below it.
chmodSync(scratch, 0o755);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Exports the task with the CLI and verifies the file with the CLI, pinned to the daemon's key. */
async function exportAndVerify(d: E2EDaemon, taskId: string, name: string): Promise<{ file: string; pubkey: string; verify: { code: number; out: string } }> {
  const file = join(scratch, `${name}.tar`);
  const exported = await cli(['audit', 'export', taskId, '-o', file, '--data', d.home]);
  expect(exported.code, exported.err).toBe(0);
  const pub = await cli(['keys', 'signing-public', '--data', d.home]);
  expect(pub.code).toBe(0);
  const pubkey = join(scratch, `${name}.pub.pem`);
  writeFileSync(pubkey, pub.out);
  const verify = await cli(['audit', 'verify', file, '--pubkey', pubkey]);
  return { file, pubkey, verify };
}

/** The members re-sealed under `signer`'s key (a signer can write any record; the checks must still hold). */
async function resignTarball(signer: ReturnType<typeof initSigningKey>, taskId: string, members: Array<{ name: string; data: Buffer }>): Promise<Buffer> {
  const { buildManifest, MANIFEST_MEMBER, SIGNATURE_MEMBER, SIGNATURE_SCHEMA } = await import('../../../src/audit/task-tarball.js');
  const { signManifestDigest } = await import('../../../src/audit/signing.js');
  const manifest = buildManifest(taskId, 'completed', members);
  const manifestSha256 = sha256Hex(manifest);
  const sig = { schema_version: SIGNATURE_SCHEMA, algorithm: 'ed25519', manifest_sha256: manifestSha256, public_key_sha256: signer.publicKeySha256, public_key: signer.publicKeyPem, signature: signManifestDigest(manifestSha256, signer.privateKey) };
  return packMembers([...members, { name: MANIFEST_MEMBER, data: manifest }, { name: SIGNATURE_MEMBER, data: Buffer.from(`${canonicalJson(sig)}\n`) }]);
}

describeWithBwrap('fusion audit e2e: sealed task tarballs', () => {
  describe('a completed task with a signing key', () => {
    let d: E2EDaemon;
    let taskId: string;
    let file: string;
    let pubkey: string;
    beforeAll(async () => {
      // The product default: attempt files are pruned once the task tarball is sealed.
      d = await startE2EDaemon({ prepareHome: (home) => void initSigningKey(home), keepAttemptFiles: false });
      taskId = (await d.submit()).taskId;
      expect((await d.waitTerminal(taskId)).state).toBe('completed');
      const done = await exportAndVerify(d, taskId, 'completed');
      expect(done.verify.code, done.verify.out).toBe(0);
      ({ file, pubkey } = done);
    }, 120_000);
    afterAll(async () => d.close());

    it('stores one signed tarball in SQLite with the required members', async () => {
      const sealed = (await d.daemon.store.getTaskTarball(taskId))!;
      expect(sealed.sha256).toBe(sha256Hex(sealed.data));
      expect(sealed.signature).not.toBeNull();
      expect(sealed.publicKeySha256).toBe(d.daemon.signingKey!.publicKeySha256);
      const names = readMembers(sealed.data).map((m) => m.name);
      for (const required of [
        'canonical-input.json', 'source-policy.json', 'budget-plan.json', 'attempts.json', 'blind-candidates.json', 'evaluation.json',
        'result/answer.md', 'result/metadata.json', 'error.json', 'prompts.json', 'roster.json', 'manifest.json', 'signature.json',
        'attempts/candidate-1.attempt-1/candidate-1.attempt-1.tool-calls.jsonl', 'attempts/candidate-1.attempt-1/candidate-1.attempt-1.tool-calls.jsonl.seal.json',
        'attempts/candidate-1.attempt-1/supervisor.broker-record.json', 'attempts/candidate-1.attempt-1.replay.json',
      ]) expect(names).toContain(required);
      // The export is the stored blob, byte for byte.
      expect(readFileSync(file).equals(sealed.data)).toBe(true);
      // Deterministic: re-packing the same members gives the same bytes.
      expect((await packMembers(readMembers(sealed.data))).equals(sealed.data)).toBe(true);
    });

    it('keeps each attempt once: the sealed tarball holds the attempts, the task directory does not', () => {
      const dir = join(d.home, 'tasks', taskId);
      expect(existsSync(join(dir, 'attempts'))).toBe(false);
      expect(existsSync(join(dir, 'replay'))).toBe(false);
      expect(existsSync(join(dir, 'result', 'answer.md'))).toBe(true);
    });

    it('bg_result checks the signature and says signed: true, keeping the exact header', async () => {
      const result = (await d.client.call('GET', `/v1/tasks/${taskId}/result`)) as Record<string, any>;
      expect(result.signed).toBe(true);
      expect(result.answer.header).toMatch(/^Answer: \d+ bytes, sha256:[0-9a-f]{64} \(verified\)\.$/);
    });

    it('verify passes offline with the pinned key and with --replay against the repository', async () => {
      const replay = await cli(['audit', 'verify', file, '--pubkey', pubkey, '--replay', '--repo', d.repo]);
      expect(replay.code, replay.out).toBe(0);
      expect(replay.out).toMatch(/verified: task .* \(completed\), \d+ members, signed by sha256:[0-9a-f]{64} \(pinned\), \d+ tool calls replayed/);
      // By task id from the data directory too (pinned to that directory's key).
      expect((await cli(['audit', 'verify', taskId, '--data', d.home])).code).toBe(0);
    });

    it('a single flipped byte in any member, a removed member or a wrong key fails naming the member', async () => {
      const original = readFileSync(file);
      const members = readMembers(original);
      const key = readFileSync(pubkey);
      const { parsePublicKey } = await import('../../../src/audit/signing.js');
      const pinned = parsePublicKey(key);
      for (const m of members) {
        if (m.data.length === 0) continue;
        // A byte in the member's data.
        const flipped = Buffer.from(original);
        flipped[m.offset + 512 + Math.floor(m.data.length / 2)]! ^= 0x01;
        const report = await verifyTaskTarball(flipped, { publicKey: pinned });
        expect(report.ok, m.name).toBe(false);
        expect(report.failure?.member, `${m.name}: ${report.failure?.message ?? ''}`).toBe(m.name);
        // The report names the member beside the message (`BROKEN: <member>: <why>`): the
        // message does not repeat it.
        expect(report.failure?.message.startsWith(`${m.name}:`), report.failure?.message).toBe(false);
        // A byte in its header (the mode field).
        const header = Buffer.from(original);
        header[m.offset + 101]! ^= 0x01;
        const headerReport = await verifyTaskTarball(header, { publicKey: pinned });
        expect(headerReport.failure?.member, `${m.name} header`).toBe(m.name);
      }
      // A byte of a member's zero padding, and of the end-of-archive blocks.
      const padded = members.find((m) => m.data.length % 512 !== 0)!;
      const padding = Buffer.from(original);
      padding[padded.end - 1]! ^= 0x01;
      expect((await verifyTaskTarball(padding, { publicKey: pinned })).failure?.member).toBe(padded.name);
      const trailer = Buffer.from(original);
      trailer[trailer.length - 1]! ^= 0x01;
      expect((await verifyTaskTarball(trailer, { publicKey: pinned })).failure?.member).toBe('(end-of-archive blocks)');
      // Removing any member (re-packed canonically, so only the removal is wrong).
      for (const m of members) {
        const without = await packMembers(members.filter((x) => x.name !== m.name));
        const report = await verifyTaskTarball(without, { publicKey: pinned });
        expect(report.failure?.member, m.name).toBe(m.name);
        expect(report.failure?.message).toMatch(/missing/);
      }
      // The wrong public key.
      const otherHome = mkdtempSync(join(scratch, 'other-key-'));
      const other = initSigningKey(otherHome);
      const wrong = await verifyTaskTarball(original, { publicKey: other.publicKey });
      expect(wrong.failure?.member).toBe('signature.json');
      const viaCli = await cli(['audit', 'verify', file, '--pubkey', join(otherHome, 'signing-key.pub.pem')]);
      expect(viaCli.code).toBe(1);
      expect(viaCli.out).toMatch(/^BROKEN: signature\.json: the tarball is signed by key/m);
    }, 120_000);

    it('a re-signed tarball whose replay record leaves calls out, is malformed, or has a nested attempt file fails naming the member', async () => {
      const { MANIFEST_MEMBER, SIGNATURE_MEMBER } = await import('../../../src/audit/task-tarball.js');
      // Even a signer (here a second key, pinned) cannot make these pass.
      const signer = initSigningKey(mkdtempSync(join(scratch, 'resign-key-')));
      const body = readMembers(readFileSync(file)).filter((m) => m.name !== MANIFEST_MEMBER && m.name !== SIGNATURE_MEMBER).map(({ name, data }) => ({ name, data }));
      const resign = (members: Array<{ name: string; data: Buffer }>): Promise<Buffer> => resignTarball(signer, taskId, members);
      const recordName = body.find((m) => m.name.endsWith('.replay.json'))!.name;
      const withRecord = (edit: (r: Record<string, unknown>) => unknown) =>
        body.map((m) => (m.name === recordName ? { name: m.name, data: Buffer.from(JSON.stringify(edit(JSON.parse(m.data.toString('utf8')) as Record<string, unknown>))) } : m));
      expect((await verifyTaskTarball(await resign(body), { publicKey: signer.publicKey })).ok).toBe(true);

      const dropped = await verifyTaskTarball(await resign(withRecord((r) => ({ ...r, calls: [] }))), { publicKey: signer.publicKey });
      expect(dropped.ok).toBe(false);
      expect(dropped.failure?.member).toBe(recordName);
      expect(dropped.failure?.message).toMatch(/^the record holds calls \[\], but the log's repository calls are/);

      const malformed = await verifyTaskTarball(await resign(withRecord((r) => ({ ...r, calls: 5 }))), { publicKey: signer.publicKey });
      expect(malformed.failure?.member).toBe(recordName);

      const attemptDir = recordName.replace(/\.replay\.json$/, '/');
      const nested = await verifyTaskTarball(await resign([...body, { name: `${attemptDir}sub/x`, data: Buffer.from('x') }]), { publicKey: signer.publicKey });
      expect(nested.failure?.member).toBe(`${attemptDir}sub/x`);
    }, 120_000);

    it('replay against a changed repository says so instead of raising a false alarm', async () => {
      const copy = mkdtempSync(join(scratch, 'repo-'));
      const { cpSync } = await import('node:fs');
      cpSync(d.repo, copy, { recursive: true });
      const changed = join(copy, RIGHT_FILE);
      writeFileSync(changed, readFileSync(changed, 'utf8').replace(/refill/gi, 'restock'));
      const report = await cli(['audit', 'verify', file, '--pubkey', pubkey, '--replay', '--repo', copy]);
      expect(report.code).toBe(1);
      // Every task runs over a snapshot whose digest its record names: a checkout that packs to
      // another one is reported as a changed repository on task.json, not as a forged result.
      expect(report.out).toMatch(/^BROKEN: task\.json: .*repository changed since the run: .* packs to bundle sha256 [0-9a-f]{16}…, the task ran over/m);
    });

    it('replay against a checkout that also holds a secret and ignored files still verifies (they were never in the snapshot)', async () => {
      const copy = mkdtempSync(join(scratch, 'repo-'));
      cpSync(d.repo, copy, { recursive: true });
      // Files the snapshot leaves out (secrets rule, .git/): the task never read them, so a replay
      // over the raw checkout would see a different tree; it must run over the rebuilt snapshot.
      writeFileSync(join(copy, '.env'), 'TOKEN=refill-secret\n');
      cpSync(join(copy, RIGHT_FILE), join(copy, '.env.local'));
      const report = await cli(['audit', 'verify', file, '--pubkey', pubkey, '--replay', '--repo', copy]);
      expect(report.code, report.out).toBe(0);
      expect(report.out).toMatch(/\d+ tool calls replayed/);
    });

    it('a task that ran over a repository bundle replays only against a checkout that packs to its digest', async () => {
      const { MANIFEST_MEMBER, SIGNATURE_MEMBER } = await import('../../../src/audit/task-tarball.js');
      const { packTree } = await import('../../../src/bundles/pack.js');
      const { DEFAULT_REPO_EXCLUDES } = await import('../../../src/bundles/excludes.js');
      const signer = initSigningKey(mkdtempSync(join(scratch, 'bundle-key-')));
      const digest = (await packTree(d.repo, { exclude: DEFAULT_REPO_EXCLUDES, maxBytes: 64 * 1024 * 1024 })).digest;
      // The record as a cluster daemon seals it: task.json names the bundle the task ran over.
      const members = readMembers(readFileSync(file)).filter((m) => m.name !== MANIFEST_MEMBER && m.name !== SIGNATURE_MEMBER).map(({ name, data }) =>
        (name === 'task.json' ? { name, data: Buffer.from(JSON.stringify({ ...(JSON.parse(data.toString('utf8')) as object), bundle_digest: digest })) } : { name, data }));
      const bundled = join(scratch, 'bundled.tar');
      writeFileSync(bundled, await resignTarball(signer, taskId, members));
      const pinned = join(scratch, 'bundled.pub.pem');
      writeFileSync(pinned, signer.publicKeyPem);
      const same = await cli(['audit', 'verify', bundled, '--pubkey', pinned, '--replay', '--repo', d.repo]);
      expect(same.code, same.out).toBe(0);
      expect(same.out).toContain(`packs to the task's bundle ${digest.slice(0, 16)}`);
      // A file no call read still changes the tree: reported as a changed repository, not a forgery.
      const copy = mkdtempSync(join(scratch, 'repo-'));
      cpSync(d.repo, copy, { recursive: true });
      writeFileSync(join(copy, 'UNRELATED.md'), 'added after the run\n');
      const other = await cli(['audit', 'verify', bundled, '--pubkey', pinned, '--replay', '--repo', copy, '--json']);
      expect(other.code).toBe(1);
      const report = JSON.parse(other.out) as { failure?: { member: string; reason?: string; message: string } };
      expect(report.failure).toMatchObject({ member: 'task.json', reason: 'repository_changed' });
      expect(report.failure?.message).toMatch(/repository changed since the run: .* packs to bundle sha256/u);
    });

    it("another task's signed tarball moved into a task's row does not verify as that task", async () => {
      const other = (await d.submit()).taskId;
      expect((await d.waitTerminal(other)).state).toBe('completed');
      expect((await cli(['audit', 'verify', other, '--data', d.home])).code).toBe(0);
      const db = await SqliteDb.open(join(d.home, 'fusion.db'), silentLogger());
      try {
        await db.run(
          `UPDATE task_tarballs SET (sha256, bytes, manifest_sha256, signature, public_key_sha256, data) =
             (SELECT sha256, bytes, manifest_sha256, signature, public_key_sha256, data FROM task_tarballs WHERE task_id = ?) WHERE task_id = ?`,
          [taskId, other],
        );
      } finally {
        await db.close();
      }
      const swapped = await cli(['audit', 'verify', other, '--data', d.home]);
      expect(swapped.code).toBe(1);
      expect(swapped.out).toMatch(/^BROKEN: manifest\.json: the stored tarball of task \S+ is the record of another task/m);
    }, 120_000);

    it('a consistent rewrite of the answer and its digests no longer reads back as verified', async () => {
      const result = (await d.daemon.store.getResult(taskId))!;
      const forged = 'The refill is in src/other.js:1.\n';
      writeFileSync(result.answerPath, forged);
      const metadata = canonicalJson({ ...(JSON.parse(result.metadata) as Record<string, unknown>), answer_sha256: sha256Hex(forged), answer_bytes: Buffer.byteLength(forged) });
      const db = await SqliteDb.open(join(d.home, 'fusion.db'), silentLogger());
      try {
        await db.run('UPDATE results SET answer_sha256 = ?, answer_bytes = ?, metadata = ?, metadata_sha256 = ? WHERE task_id = ?', [
          sha256Hex(forged), Buffer.byteLength(forged), metadata, sha256Hex(metadata), taskId,
        ]);
      } finally {
        await db.close();
      }
      const err = (await d.client.call('GET', `/v1/tasks/${taskId}/result`).catch((e: unknown) => e)) as { code?: string; message?: string };
      expect(err.code).toBe('artifact_error');
      expect(err.message).toMatch(/differs from the signed task tarball/);
    });
  });

  describe('failed and cancelled tasks', () => {
    let d: E2EDaemon | undefined;
    afterEach(async () => {
      await d?.close();
      d = undefined;
    });

    it('a failed task is sealed and verifies', async () => {
      const crash: ModelProvider = wrapProvider(builtin('path-search'), async () => {
        throw new Error('simulated provider crash');
      });
      d = await startE2EDaemon({ prepareHome: (home) => void initSigningKey(home), roster: builtinRoster({ candidates: { 2: crash } }) });
      const { taskId } = await d.submit();
      expect((await d.waitTerminal(taskId)).state).toBe('failed');
      const { verify } = await exportAndVerify(d, taskId, 'failed');
      expect(verify.code, verify.out).toBe(0);
      expect(verify.out).toMatch(/\(failed\)/);
      const members = readMembers((await d.daemon.store.getTaskTarball(taskId))!.data);
      const error = JSON.parse(members.find((m) => m.name === 'error.json')!.data.toString('utf8')) as { code: string };
      expect(error.code).toBe('model_error');
    }, 120_000);

    it('a child leaving a file whose name needs a PAX header cannot make its task unverifiable', async () => {
      d = await startE2EDaemon({
        prepareHome: (home) => void initSigningKey(home),
        hooks: {
          afterExit: (spec) => {
            if (spec.label === 'candidate-1.attempt-1') writeFileSync(join(spec.outDir, 'a'.repeat(150)), 'stray\n');
          },
        },
      });
      const { taskId } = await d.submit();
      expect((await d.waitTerminal(taskId)).state).toBe('completed');
      const result = (await d.client.call('GET', `/v1/tasks/${taskId}/result`)) as { signed?: boolean };
      expect(result.signed).toBe(true);
      const { verify } = await exportAndVerify(d, taskId, 'pax-name');
      expect(verify.code, verify.out).toBe(0);
    }, 120_000);

    it('a cancelled task is sealed and verifies', async () => {
      const entered = latch(1);
      d = await startE2EDaemon({ prepareHome: (home) => void initSigningKey(home), roster: builtinRoster({ candidates: { 1: slowCandidate('content-search', 60_000, entered.mark) } }) });
      const { taskId } = await d.submit();
      // Cancelled mid-run: once the slow candidate is inside its model call.
      await within(entered.done, 60_000, 'the slow candidate to enter its model call');
      await d.client.call('POST', `/v1/tasks/${taskId}/cancel`);
      expect((await d.waitTerminal(taskId)).state).toBe('cancelled');
      const { verify } = await exportAndVerify(d, taskId, 'cancelled');
      expect(verify.code, verify.out).toBe(0);
      expect(verify.out).toMatch(/\(cancelled\)/);
    }, 120_000);

    it('a tool result that differs from a replay fails the attempt with an audit error', async () => {
      // The replay sandbox sees the ground truth: a repository where the file the candidates
      // read differs. What the candidates logged (and sent to the model) is then not what the
      // read-only repository gives, exactly as if each child had forged its tool results.
      const truth = mkdtempSync(join(scratch, 'truth-'));
      chmodSync(truth, 0o755);
      let repo = '';
      d = await startE2EDaemon({
        hooks: {
          beforeLaunch: (spec) => {
            if (spec.label !== CANDIDATE_REPLAY_LABEL) return spec;
            cpSync(repo, truth, { recursive: true });
            const file = join(truth, RIGHT_FILE);
            writeFileSync(file, readFileSync(file, 'utf8').replace(/refill/gi, 'restock'));
            return { ...spec, repoDir: truth };
          },
        },
      });
      repo = d.repo;
      const { taskId } = await d.submit();
      const task = await d.waitTerminal(taskId);
      expect(task.state).toBe('failed');
      expect(task.error.code, task.error.message).toBe('child_event_invalid');
      expect(task.error.message).toMatch(/tool-call replay failed: call \d+ \((read|grep|find|ls)\): the logged result .* differs from a replay over the read-only repository/);
      // The replay record is kept in the sealed tarball, showing the differing digests, and its
      // attempt is a failed one (the first attempt caught fails the run; the others stop).
      const members = readMembers((await d.daemon.store.getTaskTarball(taskId))!.data);
      const records = members.filter((m) => m.name.endsWith('.replay.json')).map((m) => ({
        name: /attempts\/(candidate-\d)\.attempt-1\.replay\.json/.exec(m.name)![1],
        calls: (JSON.parse(m.data.toString('utf8')) as { calls: Array<{ result_sha256: string; replayed_sha256: string }> }).calls,
      }));
      const forged = records.filter((r) => r.calls.some((c) => c.result_sha256 !== c.replayed_sha256));
      expect(forged.length).toBeGreaterThan(0);
      const attempts = await d.daemon.store.listAttempts(taskId);
      for (const r of forged) expect(attempts.find((a) => a.stage === r.name)?.status).toBe('failed');
      expect(existsSync(join(d.home, 'tasks', taskId, 'result'))).toBe(false);
    }, 120_000);
  });
});
