/**
 * Offline verification of one task tarball: what an auditor runs on another machine with only
 * the exported file (and, optionally, the service's public key and a checkout of the repository).
 *
 * Checks, in order, stopping at the first broken member:
 *   1. tar structure (checksums, regular files only) and canonical bytes (a re-pack of the
 *      members must give the very same bytes, so no header or padding byte can change);
 *   2. signature.json (when present, or required by a pinned key): Ed25519 over the manifest
 *      digest, by the pinned key when one is given; with a pinned key, an unsigned tarball passes
 *      only when the key's signed list of tasks sealed before it records this very tarball;
 *   3. manifest.json: canonical, closed, and every member listed with its size and sha256, no
 *      member missing or unlisted;
 *   4. the record itself: task ids agree, every attempt's files re-pack to the attempt tarball
 *      digest recorded at the time, every candidate log and seal verifies and cross-checks with
 *      the broker's record, every replay record agrees with its log, the answer and metadata
 *      agree with each other;
 *   5. with a repository: every recorded tool call replays to the logged result digest (a
 *      difference is reported as "repository changed since the run" when a file it depended on
 *      changed, as a mismatch otherwise).
 */
import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KeyObject } from 'node:crypto';
import { z } from 'zod';
import { canonicalJson, sha256Hex } from '../contracts/canonical.js';
import { RESEARCH_FETCH_TOOL, CANDIDATE_TOOLS } from '../contracts/constants.js';
import type { BrokerRecord } from '../contracts/broker-record.js';
import { toFusionError } from '../errors.js';
import { verifyToolCallLog, toolCallLogFileName } from './verify-log.js';
import { crossCheckBrokerRecord, crossCheckConversation } from './cross-check.js';
import { firstDifferenceFromPack, memberAt, packMembers, readMembers, TarFormatError, type ReadMember } from './tar-members.js';
import { parsePublicKey, publicKeySha256, verifyManifestSignature } from './signing.js';
import { MANIFEST_MEMBER, MANIFEST_SCHEMA, SIGNATURE_MEMBER, SIGNATURE_SCHEMA } from './task-tarball.js';
import { unsignedStanding, type UnsignedBeforeKey } from './unsigned-before-key.js';
import { REPLAY_RECORD_SCHEMA, REPLAY_RECORD_SUFFIX, inconclusiveMessage, replayRecordOffline, timeLimited, type ReplayRecord } from './replay.js';
import { PACK_SCRATCH_PREFIX } from './tar-members.js';
import { packTree } from '../bundles/pack.js';
import { DEFAULT_REPO_EXCLUDES } from '../bundles/excludes.js';
import { readBundleTar } from '../bundles/bundle-tar.js';

export interface OfflineVerifyOptions {
  /** Pinned public key: the tarball must be signed by exactly this key. */
  publicKey?: KeyObject;
  /** Where the pinned key came from, as messages name it (`--pubkey FILE`, the data directory's key). */
  publicKeySource?: string;
  /**
   * The pinned key's list of tasks sealed unsigned before it (consulted for a task read by id
   * from the key's data directory), or why it cannot be used; absent: not consulted.
   */
  unsignedBeforeKey?: UnsignedBeforeKey | null | { unusable: string };
  /** Replay every recorded tool call against this checkout. */
  replayRepo?: string;
  scratchRoot?: string;
  /** The task the tarball must be the record of (verifying a task read from the database by id). */
  taskId?: string;
}

export interface OfflineVerifyReport {
  ok: boolean;
  taskId: string | null;
  state: string | null;
  members: number;
  signed: boolean;
  /** sha256 of the signer's public key, when signed. */
  signer: string | null;
  /** True when the signature was checked against a key the auditor supplied. */
  pinned: boolean;
  /** For an unsigned tarball the pinned key's list records: when that key was created. */
  sealedBeforeKey: string | null;
  /** Tool calls replayed against the repository (with replayRepo). */
  replayed: number;
  /** Tool calls whose result depended on a wall-clock limit: "inconclusive (time-limited)", not a forgery. */
  inconclusive: Array<{ member: string; ordinal: number; message: string }>;
  checks: string[];
  /** The first broken member and why. */
  failure?: { member: string; message: string; reason?: 'repository_changed' | 'mismatch' };
}

/** The first broken member and why; the message does not repeat the member (the report names it beside). */
class Broken extends Error {
  constructor(readonly member: string, message: string, readonly reason?: 'repository_changed' | 'mismatch') {
    super(message);
  }
}

const HEX64 = z.string().regex(/^[0-9a-f]{64}$/);
const ManifestSchema = z.strictObject({
  schema_version: z.literal(MANIFEST_SCHEMA),
  task_id: z.string().min(1),
  state: z.enum(['completed', 'failed', 'cancelled']),
  members: z.array(z.strictObject({ name: z.string().min(1), bytes: z.number().int().min(0), sha256: HEX64 })),
});
const SignatureSchema = z.strictObject({
  schema_version: z.literal(SIGNATURE_SCHEMA),
  algorithm: z.literal('ed25519'),
  manifest_sha256: HEX64,
  public_key_sha256: HEX64,
  public_key: z.string().min(1),
  signature: z.string().min(1),
});
const TaskSchema = z.object({ task_id: z.string(), workflow: z.enum(['investigate', 'research']), state: z.string(), canonical_input_sha256: HEX64, bundle_digest: HEX64.optional() });
const ReplayRecordSchema = z.object({
  schema_version: z.literal(REPLAY_RECORD_SCHEMA),
  tools: z.array(z.string()),
  backend: z.string(),
  calls: z.array(z.object({
    ordinal: z.number().int().min(0),
    tool_name: z.string(),
    arguments: z.string(),
    result_sha256: z.string(),
    status: z.enum(['ok', 'error']),
    replayed_sha256: z.string(),
    timer_cut: z.literal(true).optional(),
    replayed_timer_cut: z.literal(true).optional(),
    touched: z.record(z.string(), z.string()),
  })),
});
const AttemptsSchema = z.array(z.object({ stage: z.string(), attempt: z.number().int().min(1), status: z.string(), tarball_sha256: HEX64.nullable() }));

/** Parses a member that must be canonical JSON (one line + newline, as the sealer writes it). */
function canonicalMember<T>(member: ReadMember, schema: z.ZodType<T>): T {
  const text = member.data.toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Broken(member.name, `${member.name} is not valid JSON`);
  }
  if (`${canonicalJson(value)}\n` !== text) throw new Broken(member.name, `${member.name} is not in canonical form (bytes were changed)`);
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new Broken(member.name, `${member.name} is invalid: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  }
  return parsed.data;
}

const OptionsSchema = z.object({ repoExclude: z.array(z.string()).optional() });
/** The largest checkout the replay packs to compare with a bundle digest (the daemon's cap is at most 1 GiB). */
const AUDIT_PACK_MAX_BYTES = 1024 * 1024 * 1024;

/** Packs the checkout as the daemon did and checks it against the task's digest; returns the archive (the tree the task read). */
async function checkBundleDigest(repo: string, digest: string, options: z.infer<typeof OptionsSchema>, report: OfflineVerifyReport): Promise<Buffer> {
  let packed;
  try {
    packed = await packTree(repo, { exclude: options.repoExclude ?? DEFAULT_REPO_EXCLUDES, maxBytes: AUDIT_PACK_MAX_BYTES });
  } catch (err) {
    throw new Broken('task.json', `repository changed since the run: ${repo} could not be packed to compare with the task's bundle (${toFusionError(err).message})`, 'repository_changed');
  }
  if (packed.digest !== digest) {
    throw new Broken('task.json', `repository changed since the run: ${repo} packs to bundle sha256 ${packed.digest.slice(0, 16)}…, the task ran over ${digest.slice(0, 16)}…`, 'repository_changed');
  }
  report.checks.push(`repository: ${repo} packs to the task's bundle ${digest.slice(0, 16)}…`);
  return packed.data;
}

/**
 * Writes the packed tree into a fresh scratch directory, as the daemon's snapshot holds it (same
 * entries and modes): the task read that tree, not the checkout with its ignored and secret files.
 */
async function unpackForReplay(archive: Buffer): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'fusion-verify-repo-'));
  await chmod(dir, 0o755);
  for (const entry of readBundleTar(archive, { maxBytes: AUDIT_PACK_MAX_BYTES, maxEntries: 1_000_000 })) {
    const path = join(dir, entry.path);
    if (entry.type === 'dir') await mkdir(path, { mode: 0o755 });
    else if (entry.type === 'symlink') await symlink(entry.target, path);
    else await writeFile(path, entry.data, { mode: entry.executable ? 0o755 : 0o644, flag: 'wx' });
  }
  return dir;
}

function jsonMember<T>(member: ReadMember, schema: z.ZodType<T>): T {
  let value: unknown;
  try {
    value = JSON.parse(member.data.toString('utf8'));
  } catch {
    throw new Broken(member.name, `${member.name} is not valid JSON`);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new Broken(member.name, `${member.name} is invalid`);
  return parsed.data;
}

export async function verifyTaskTarball(tar: Buffer, options: OfflineVerifyOptions = {}): Promise<OfflineVerifyReport> {
  const report: OfflineVerifyReport = { ok: false, taskId: null, state: null, members: 0, signed: false, signer: null, pinned: false, sealedBeforeKey: null, replayed: 0, inconclusive: [], checks: [] };
  const scratch = await mkdtemp(join(options.scratchRoot ?? tmpdir(), PACK_SCRATCH_PREFIX));
  try {
    await runChecks(tar, options, report, scratch);
    report.ok = true;
  } catch (err) {
    if (err instanceof Broken) {
      report.failure = { member: err.member, message: err.message, ...(err.reason ? { reason: err.reason } : {}) };
    } else if (err instanceof TarFormatError) {
      report.failure = { member: err.member, message: err.message };
    } else {
      throw err;
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  return report;
}

async function runChecks(tar: Buffer, options: OfflineVerifyOptions, report: OfflineVerifyReport, scratch: string): Promise<void> {
  // 1. Structure and canonical bytes.
  const members = readMembers(tar);
  report.members = members.length;
  const at = await firstDifferenceFromPack(members, tar);
  if (at !== -1) {
    const member = memberAt(members, at);
    throw new Broken(member, `the tar bytes of ${member} (header or padding at byte ${at}) differ from the canonical form`);
  }
  report.checks.push(`tar structure: ${members.length} members, canonical bytes`);
  const byName = new Map(members.map((m) => [m.name, m]));

  // 2. Signature.
  const manifestMember = byName.get(MANIFEST_MEMBER);
  if (manifestMember === undefined) throw new Broken(MANIFEST_MEMBER, 'manifest.json is missing');
  const manifestSha = sha256Hex(manifestMember.data);
  const sigMember = byName.get(SIGNATURE_MEMBER);
  if (sigMember !== undefined) {
    const sig = canonicalMember(sigMember, SignatureSchema);
    let embedded: KeyObject;
    try {
      embedded = parsePublicKey(sig.public_key);
    } catch {
      throw new Broken(SIGNATURE_MEMBER, 'signature.json holds no valid Ed25519 public key');
    }
    if (publicKeySha256(embedded) !== sig.public_key_sha256) throw new Broken(SIGNATURE_MEMBER, 'signature.json: public_key_sha256 does not match its public key');
    const key = options.publicKey ?? embedded;
    if (options.publicKey !== undefined && publicKeySha256(options.publicKey) !== sig.public_key_sha256) {
      throw new Broken(SIGNATURE_MEMBER, `the tarball is signed by key ${sig.public_key_sha256.slice(0, 16)}…, not by the given public key ${publicKeySha256(options.publicKey).slice(0, 16)}…`);
    }
    if (!verifyManifestSignature(sig.manifest_sha256, sig.signature, key)) throw new Broken(SIGNATURE_MEMBER, 'the Ed25519 signature does not verify');
    if (sig.manifest_sha256 !== manifestSha) throw new Broken(MANIFEST_MEMBER, 'manifest.json differs from the manifest that was signed');
    report.signed = true;
    report.signer = sig.public_key_sha256;
    report.pinned = options.publicKey !== undefined;
    report.checks.push(`signature: ed25519 by ${sig.public_key_sha256.slice(0, 16)}… ${report.pinned ? `(pinned: ${options.publicKeySource ?? 'the given public key'})` : '(key embedded in the tarball; pass --pubkey to pin it)'}`);
  } else if (options.publicKey !== undefined) {
    // Named truthfully: the key may be the data directory's own, not one the auditor passed.
    const source = options.publicKeySource ?? 'the given public key';
    const list = options.unsignedBeforeKey;
    const standing = list === undefined ? undefined : list !== null && 'unusable' in list ? { listed: false as const, why: list.unusable } : unsignedStanding(list, options.taskId ?? '', sha256Hex(tar));
    if (standing?.listed !== true) {
      throw new Broken(SIGNATURE_MEMBER, `signature.json is missing: the tarball is not signed, but it is verified against ${source}${standing === undefined ? '' : `, and ${standing.why}`}`);
    }
    const known = list as UnsignedBeforeKey;
    report.sealedBeforeKey = known.createdAt;
    report.checks.push(`signature: none; sealed before the signing key was created (${known.createdAt}): the key's signed list ${known.file} records this tarball`);
  }

  // 3. Manifest.
  const manifest = canonicalMember(manifestMember, ManifestSchema);
  report.taskId = manifest.task_id;
  report.state = manifest.state;
  if (options.taskId !== undefined && manifest.task_id !== options.taskId) {
    throw new Broken(MANIFEST_MEMBER, `the stored tarball of task ${options.taskId} is the record of another task (${manifest.task_id})`);
  }
  const listed = new Set<string>();
  for (const entry of manifest.members) {
    listed.add(entry.name);
    const member = byName.get(entry.name);
    if (member === undefined) throw new Broken(entry.name, `${entry.name} is listed in the manifest but missing from the tarball`);
    if (member.data.length !== entry.bytes || sha256Hex(member.data) !== entry.sha256) {
      throw new Broken(entry.name, 'sha256 differs from the manifest');
    }
  }
  for (const m of members) {
    if (m.name !== MANIFEST_MEMBER && m.name !== SIGNATURE_MEMBER && !listed.has(m.name)) throw new Broken(m.name, `${m.name} is not listed in the manifest`);
  }
  report.checks.push(`manifest: ${manifest.members.length} member digests`);

  // 4. The record itself.
  const need = (name: string): ReadMember => {
    const m = byName.get(name);
    if (m === undefined) throw new Broken(name, `${name} is missing`);
    return m;
  };
  const task = jsonMember(need('task.json'), TaskSchema);
  if (task.task_id !== manifest.task_id || task.state !== manifest.state) throw new Broken('task.json', 'task.json names another task or state than the manifest');
  if (sha256Hex(need('canonical-input.json').data) !== task.canonical_input_sha256) throw new Broken('canonical-input.json', 'canonical-input.json does not match its recorded digest');
  const input = jsonMember(need('canonical-input.json'), z.object({ context: z.object({ declared_sources: z.array(z.object({ canonical_url: z.string() })) }) }));
  const declaredUrls = input.context.declared_sources.map((s) => s.canonical_url);
  const attempts = jsonMember(need('attempts.json'), AttemptsSchema);
  const replayRecords: Array<{ member: string; record: ReplayRecord }> = [];
  for (const a of attempts) {
    const name = `${a.stage}.attempt-${a.attempt}`;
    const prefix = `attempts/${name}/`;
    const files = members.filter((m) => m.name.startsWith(prefix));
    if (files.length === 0) {
      if (a.tarball_sha256 !== null) throw new Broken(prefix, `the files of ${name} are missing`);
      continue;
    }
    const dir = join(scratch, 'attempts', name);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    for (const f of files) {
      // Attempt directories are flat: a nested name is no file the sealer writes.
      if (f.name.slice(prefix.length).includes('/')) throw new Broken(f.name, `${f.name} is nested below the files of ${name}`);
      await writeFile(join(dir, f.name.slice(prefix.length)), f.data, { mode: 0o600, flag: 'wx' });
    }
    if (a.tarball_sha256 !== null) {
      // The attempt tarball holds the same flat files under their own names (audit/tarball.ts).
      const packed = await packMembers(files.map((f) => ({ name: f.name.slice(prefix.length), data: f.data })));
      if (sha256Hex(packed) !== a.tarball_sha256) throw new Broken(files[0]!.name, `the files of ${name} differ from its sealed attempt tarball (sha256 ${a.tarball_sha256.slice(0, 12)}…)`);
    }
    const slot = /^candidate-([123])$/.exec(a.stage)?.[1];
    if (slot === undefined || a.status !== 'succeeded') continue;
    const tools = task.workflow === 'research' ? [...CANDIDATE_TOOLS, RESEARCH_FETCH_TOOL] : [...CANDIDATE_TOOLS];
    const logMember = `${prefix}${toolCallLogFileName(Number(slot), a.attempt)}`;
    let records;
    try {
      const verified = await verifyToolCallLog({ dir, slot: Number(slot), attempt: a.attempt, allowedTools: tools, declaredUrls });
      records = verified.records;
      const broker = JSON.parse(need(`${prefix}supervisor.broker-record.json`).data.toString('utf8')) as BrokerRecord[];
      crossCheckBrokerRecord(records, broker, { allowChildOnlyRejections: true });
      crossCheckConversation(records, broker);
    } catch (err) {
      if (err instanceof Broken) throw err;
      throw new Broken(logMember, `${name}: ${toFusionError(err).message}`);
    }
    const replayName = `attempts/${name}${REPLAY_RECORD_SUFFIX}`;
    const replayMember = byName.get(replayName);
    if (replayMember !== undefined) {
      const record = jsonMember(replayMember, ReplayRecordSchema) as ReplayRecord;
      // The record must hold every repository call of the log (as the sealer writes it), so a
      // record that leaves calls out cannot pass as a complete replay.
      const expected = records.filter((r) => (CANDIDATE_TOOLS as readonly string[]).includes(r.tool_name)).map((r) => r.ordinal);
      const got = record.calls.map((c) => c.ordinal);
      if (expected.length !== got.length || expected.some((o, i) => got[i] !== o)) {
        throw new Broken(replayName, `the record holds calls ${JSON.stringify(got)}, but the log's repository calls are ${JSON.stringify(expected)}`);
      }
      const byOrdinal = new Map(records.map((r) => [r.ordinal, r]));
      for (const call of record.calls) {
        const logged = byOrdinal.get(call.ordinal);
        if (logged === undefined || logged.tool_name !== call.tool_name || sha256Hex(call.arguments) !== logged.arguments_sha256 ||
          logged.result_sha256 !== call.result_sha256 || logged.timer_cut !== call.timer_cut) {
          throw new Broken(replayName, `call ${call.ordinal} does not agree with the sealed log`);
        }
        if (call.replayed_sha256 !== call.result_sha256) {
          // A difference where a wall-clock limit cut either side failed its attempt as
          // replay_inconclusive: no forgery is proven, and the attempt's answer was not used.
          if (!timeLimited(call)) throw new Broken(replayName, `call ${call.ordinal} does not agree with the sealed log`);
          report.inconclusive.push({ member: replayName, ordinal: call.ordinal, message: inconclusiveMessage(call) });
        }
      }
      replayRecords.push({ member: replayName, record });
    }
  }
  report.checks.push(`attempts: ${attempts.length} (attempt tarball digests, logs, seals, broker cross-checks, replay records)`);

  if (manifest.state === 'completed') {
    const answer = need('result/answer.md');
    const metadata = jsonMember(need('result/metadata.json'), z.object({ answer_sha256: HEX64, attempts: z.array(z.object({ stage: z.string(), attempt: z.number(), tarballSha256: HEX64 })) }).passthrough());
    const record = jsonMember(need('result/result-record.json'), z.object({ answer_sha256: HEX64, metadata_sha256: HEX64 }).passthrough());
    if (sha256Hex(answer.data) !== metadata.answer_sha256 || record.answer_sha256 !== metadata.answer_sha256) throw new Broken('result/answer.md', 'the answer does not match the result metadata');
    if (sha256Hex(need('result/metadata.json').data) !== record.metadata_sha256) throw new Broken('result/metadata.json', 'the metadata does not match its recorded digest');
    for (const a of metadata.attempts) {
      const row = attempts.find((r) => r.stage === a.stage && r.attempt === a.attempt);
      if (row?.tarball_sha256 !== a.tarballSha256) throw new Broken('result/metadata.json', `the metadata names attempt ${a.stage}#${a.attempt} with another tarball digest`);
    }
    report.checks.push('result: answer and metadata digests');
  }

  // 5. Replay.
  if (options.replayRepo !== undefined) {
    // Cluster mode: the task ran over a bundle; the checkout must pack to the same digest, or
    // the difference is the repository's, not a forged result's.
    const archive = task.bundle_digest === undefined ? undefined : await checkBundleDigest(options.replayRepo, task.bundle_digest, jsonMember(need('task-options.json'), OptionsSchema), report);
    // A task that ran over a snapshot is replayed over that snapshot, rebuilt from the checkout.
    const tree = archive === undefined ? options.replayRepo : await unpackForReplay(archive);
    try {
      for (const { member, record } of replayRecords) {
        const outcome = await replayRecordOffline(record, tree);
        report.replayed += outcome.replayed;
        for (const call of outcome.inconclusive) {
          if (!report.inconclusive.some((c) => c.member === member && c.ordinal === call.ordinal)) report.inconclusive.push({ member, ...call });
        }
        if (!outcome.ok) throw new Broken(member, outcome.message ?? 'replay failed', outcome.reason);
      }
    } finally {
      if (tree !== options.replayRepo) await rm(tree, { recursive: true, force: true });
    }
    const limited = report.inconclusive.length;
    report.checks.push(limited === 0
      ? `replay: ${report.replayed} tool calls reproduce the logged results`
      : `replay: ${report.replayed - limited} of ${report.replayed} tool calls reproduce the logged results; ${limited} inconclusive (time-limited)`);
  }
}
