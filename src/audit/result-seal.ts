/**
 * bg_result's signature check. With a signing key configured, a completed result is delivered
 * only when the task tarball in the database carries a valid Ed25519 signature over its
 * manifest, and the signed manifest names the very answer and metadata being delivered. A
 * rewrite of the answer file together with every digest in the database then still fails: the
 * signed manifest keeps the original digests, and forging it needs the private key. The signed
 * manifest must name this task (and a completed state): a genuine signed tarball of another
 * task, swapped in with that task's answer, is refused too.
 */
import type { KeyObject } from 'node:crypto';
import { sha256Hex } from '../contracts/canonical.js';
import { FusionError } from '../errors.js';
import type { Store } from '../store/port.js';
import type { ResultSealCheck } from '../tasks/result-reader.js';
import { readMembers } from './tar-members.js';
import { verifyManifestSignature } from './signing.js';
import { MANIFEST_MEMBER } from './task-tarball.js';

/** How long after completion a missing tarball means "still being sealed" rather than "lost". */
export const SEAL_GRACE_MS = 60_000;

function invalid(reason: string): FusionError {
  return new FusionError('artifact_error', `fusion committed result invalid: ${reason}`);
}

export function createResultSealCheck(store: Store, publicKey: KeyObject, now: () => number = Date.now): ResultSealCheck {
  return async (task, answerSha256, metadata) => {
    const sealed = await store.getTaskTarball(task.id);
    if (sealed === null) {
      if (now() - Date.parse(task.updatedAt) < SEAL_GRACE_MS) {
        throw new FusionError('task_not_terminal', 'the task tarball is still being sealed; retry in a moment', { retryable: true });
      }
      throw invalid('the task has no sealed tarball');
    }
    if (sha256Hex(sealed.data) !== sealed.sha256 || sealed.data.length !== sealed.bytes) throw invalid('task tarball digest mismatch');
    if (sealed.signature === null) throw invalid('the task tarball is not signed');
    if (!verifyManifestSignature(sealed.manifestSha256, sealed.signature, publicKey)) throw invalid('task tarball signature does not verify');
    let manifest: { task_id?: unknown; state?: unknown; members?: Array<{ name: string; sha256: string }> };
    try {
      const member = readMembers(sealed.data).find((m) => m.name === MANIFEST_MEMBER);
      if (member === undefined || sha256Hex(member.data) !== sealed.manifestSha256) throw new Error('manifest digest');
      manifest = JSON.parse(member.data.toString('utf8')) as typeof manifest;
    } catch {
      throw invalid('the signed manifest of the task tarball is unreadable');
    }
    // The signature proves the key made this manifest; the manifest must also be this task's,
    // or another task's signed tarball (with its answer) could be swapped in.
    if (manifest.task_id !== task.id || manifest.state !== 'completed') throw invalid('the signed task tarball belongs to another task');
    const digestOf = (name: string): string | undefined => manifest.members?.find((m) => m.name === name)?.sha256;
    if (digestOf('result/answer.md') !== answerSha256) throw invalid('the answer differs from the signed task tarball');
    if (digestOf('result/metadata.json') !== sha256Hex(metadata)) throw invalid('the result metadata differs from the signed task tarball');
  };
}
