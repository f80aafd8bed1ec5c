/**
 * bg_result's signature check. With a signing key configured, a completed result is delivered
 * only when the task tarball in the database carries a valid Ed25519 signature over its
 * manifest, and the signed manifest names the very answer and metadata being delivered. A
 * rewrite of the answer file together with every digest in the database then still fails: the
 * signed manifest keeps the original digests, and forging it needs the private key. The signed
 * manifest must name this task (and a completed state): a genuine signed tarball of another
 * task, swapped in with that task's answer, is refused too.
 *
 * An unsigned tarball passes only for a task sealed before the key was created, with the very
 * tarball digest the key's signed list recorded then (unsigned-before-key.ts); its manifest must
 * name this task and answer just the same. Any other unsigned tarball is refused, so stripping
 * the signature from a task sealed with the key gains nothing.
 */
import type { KeyObject } from 'node:crypto';
import { sha256Hex } from '../contracts/canonical.js';
import { FusionError } from '../errors.js';
import type { Store } from '../store/port.js';
import type { AttemptRecordCheck, ResultSealCheck, SealStanding } from '../tasks/result-reader.js';
import { readMembers } from './tar-members.js';
import { verifyManifestSignature } from './signing.js';
import { MANIFEST_MEMBER, SIGNATURE_MEMBER } from './task-tarball.js';
import { unsignedStanding, type UnsignedBeforeKey } from './unsigned-before-key.js';

/** How long after completion a missing tarball means "still being sealed" rather than "lost". */
export const SEAL_GRACE_MS = 60_000;

function invalid(reason: string): FusionError {
  return new FusionError('artifact_error', `fusion committed result invalid: ${reason}`);
}

export function createResultSealCheck(store: Store, publicKey: KeyObject, unsignedBefore: UnsignedBeforeKey | null = null, now: () => number = Date.now): ResultSealCheck {
  return async (task, answerSha256, metadata) => {
    const sealed = await store.getTaskTarball(task.id);
    if (sealed === null) {
      if (now() - Date.parse(task.updatedAt) < SEAL_GRACE_MS) {
        throw new FusionError('task_not_terminal', 'the task tarball is still being sealed; retry in a moment', { retryable: true });
      }
      throw invalid('the task has no sealed tarball');
    }
    if (sha256Hex(sealed.data) !== sealed.sha256 || sealed.data.length !== sealed.bytes) throw invalid('task tarball digest mismatch');
    let standing: SealStanding;
    if (sealed.signature === null) {
      const listed = unsignedStanding(unsignedBefore, task.id, sealed.sha256);
      if (!listed.listed) throw invalid(`the task tarball is not signed, and ${listed.why}`);
      standing = { signed: false, sealedBeforeKey: unsignedBefore!.createdAt };
    } else {
      if (!verifyManifestSignature(sealed.manifestSha256, sealed.signature, publicKey)) throw invalid('task tarball signature does not verify');
      standing = { signed: true };
    }
    // Named as what vouches for the answer: the signed tarball, or the one the key's list recorded.
    const what = standing.signed ? 'signed task tarball' : 'task tarball sealed before the signing key';
    let manifest: { task_id?: unknown; state?: unknown; members?: Array<{ name: string; sha256: string }> };
    try {
      const member = readMembers(sealed.data).find((m) => m.name === MANIFEST_MEMBER);
      if (member === undefined || sha256Hex(member.data) !== sealed.manifestSha256) throw new Error('manifest digest');
      manifest = JSON.parse(member.data.toString('utf8')) as typeof manifest;
    } catch {
      throw invalid(`the manifest of the ${what} is unreadable`);
    }
    // The signature proves the key made this manifest; the manifest must also be this task's,
    // or another task's signed tarball (with its answer) could be swapped in.
    if (manifest.task_id !== task.id || manifest.state !== 'completed') throw invalid(`the ${what} belongs to another task`);
    const digestOf = (name: string): string | undefined => manifest.members?.find((m) => m.name === name)?.sha256;
    if (digestOf('result/answer.md') !== answerSha256) throw invalid(`the answer differs from the ${what}`);
    if (digestOf('result/metadata.json') !== sha256Hex(metadata)) throw invalid(`the result metadata differs from the ${what}`);
    return standing;
  };
}

/**
 * bg_result's check of the attempts a result names, against the sealed task tarball (which is
 * the one copy of every attempt once sealed; the unpacked files and attempt .tar files are then
 * removed). The tarball's bytes must match its stored digest, the manifest member its stored
 * digest, every member the manifest's digest, and the tarball's attempts.json must record, for
 * every attempt the metadata names, the same attempt-tarball digest, with that attempt's files
 * present. (Re-packing each attempt's files to that digest is `fusion audit verify`'s job.)
 * Returns false when the task has no sealed tarball yet: the caller checks the files on disk.
 */
export function createAttemptRecordCheck(store: Store): AttemptRecordCheck {
  return async (task, attempts) => {
    const sealed = await store.getTaskTarball(task.id);
    if (sealed === null) return false;
    if (sealed.data.length !== sealed.bytes || sha256Hex(sealed.data) !== sealed.sha256) throw invalid('task tarball digest mismatch');
    let byName: Map<string, Buffer>;
    let manifest: { task_id?: unknown; members?: Array<{ name: string; sha256: string }> };
    try {
      byName = new Map(readMembers(sealed.data).map((m) => [m.name, m.data]));
      const m = byName.get(MANIFEST_MEMBER);
      if (m === undefined || sha256Hex(m) !== sealed.manifestSha256) throw new Error('manifest digest');
      manifest = JSON.parse(m.toString('utf8')) as typeof manifest;
    } catch {
      throw invalid('the manifest of the task tarball is unreadable');
    }
    if (manifest.task_id !== task.id) throw invalid('the task tarball belongs to another task');
    const listed = new Map((manifest.members ?? []).map((e) => [e.name, e.sha256]));
    for (const [name, data] of byName) {
      if (name === MANIFEST_MEMBER || name === SIGNATURE_MEMBER) continue;
      if (listed.get(name) !== sha256Hex(data)) throw invalid(`task tarball member ${name} differs from its manifest`);
    }
    let recorded: Array<{ stage: string; attempt: number; tarball_sha256: string | null }>;
    try {
      recorded = JSON.parse(byName.get('attempts.json')?.toString('utf8') ?? 'null') as typeof recorded;
      if (!Array.isArray(recorded)) throw new Error('not a list');
    } catch {
      throw invalid('the task tarball has no readable attempts.json');
    }
    const names = [...byName.keys()];
    for (const a of attempts) {
      const row = recorded.find((r) => r.stage === a.stage && r.attempt === a.attempt);
      if (row?.tarball_sha256 !== a.tarballSha256) throw invalid(`audit tarball digest mismatch for ${a.stage} attempt ${a.attempt}`);
      const prefix = `attempts/${a.stage}.attempt-${a.attempt}/`;
      if (!names.some((n) => n.startsWith(prefix))) throw invalid(`the files of ${a.stage} attempt ${a.attempt} are missing from the task tarball`);
    }
    return true;
  };
}
