/**
 * Workspace API keys. A key is `fsk_<id>_<secret>`: the id (not secret) finds the row, and the
 * sha256 of the whole presented key is compared with the stored digest in constant time. Only
 * the digest is stored; the key is shown once, by `fusion keys create`.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { FusionError } from '../errors.js';
import { sha256Hex } from '../contracts/canonical.js';
import { WorkspaceIdSchema, type ApiKeyKind } from '../contracts/research.js';
import type { ApiKeyRecord, ApiKeyStore } from '../store/research-port.js';

const KEY_PATTERN = /^fsk_(key_[0-9a-f]{16})_[A-Za-z0-9_-]{43}$/;

export interface IssuedKey {
  record: ApiKeyRecord;
  /** The key itself: returned once, never stored. */
  key: string;
}

export async function issueKey(store: ApiKeyStore, workspaceId: string, kind: ApiKeyKind): Promise<IssuedKey> {
  const ws = WorkspaceIdSchema.safeParse(workspaceId);
  if (!ws.success) throw new FusionError('invalid_input', `workspace ${ws.error.issues[0]?.message ?? 'is invalid'}`, { details: { field: 'workspace' } });
  const id = `key_${randomBytes(8).toString('hex')}`;
  const key = `fsk_${id}_${randomBytes(32).toString('base64url')}`;
  const record = await store.insertKey({ id, workspaceId, kind, keySha256: sha256Hex(key) });
  return { record, key };
}

export interface Principal {
  keyId: string;
  workspaceId: string;
}

/**
 * Resolves `Authorization: Bearer <key>` to its workspace: 401 for anything but a live key
 * whose digest matches, 403 for personal and copilot keys (valid, but not for this API).
 */
export async function authenticate(store: ApiKeyStore, authorization: string | undefined): Promise<Principal> {
  const unauthorized = (why: string): FusionError =>
    new FusionError('unauthorized', `a valid workspace API key is required (Authorization: Bearer <key>): ${why}`);
  if (authorization === undefined) throw unauthorized('no Authorization header');
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match) throw unauthorized('the Authorization header is not a Bearer token');
  const presented = match[1]!;
  const id = KEY_PATTERN.exec(presented)?.[1];
  if (id === undefined) throw unauthorized('the key is malformed');
  const record = await store.getKey(id);
  // The digest comparison runs whether or not the row exists, so timing does not tell them apart.
  const expected = Buffer.from(record?.keySha256 ?? '0'.repeat(64), 'hex');
  const actual = Buffer.from(sha256Hex(presented), 'hex');
  const equal = timingSafeEqual(expected, actual);
  if (record === null || !equal) throw unauthorized('unknown key');
  if (record.revokedAt !== null) throw unauthorized('the key was revoked');
  if (record.kind !== 'workspace') {
    throw new FusionError('forbidden', `a ${record.kind} key cannot use the research API; use a workspace key`, { details: { kind: record.kind } });
  }
  return { keyId: record.id, workspaceId: record.workspaceId };
}
