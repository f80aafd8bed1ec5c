/**
 * The tasks sealed unsigned before the signing key existed (docs/security.md#signing-later).
 *
 * A daemon with a signing key refuses an unsigned task tarball: otherwise stripping the
 * signature from a new task's record, and rewriting it, would pass. The tasks sealed while there
 * was no key would then become unreadable the moment a key is created. So `fusion keys
 * signing-init`, which runs with no daemon on the data directory, records the id and tarball
 * digest of every task sealed unsigned up to that moment, and signs that list with the new key.
 * Those tasks, with those very tarball bytes, and only those, stay readable and verifiable as
 * "unsigned (sealed before the signing key was created on DATE)": a task sealed after the key is
 * never on the list, and a listed task whose tarball changed no longer matches its digest.
 */
import { closeSync, constants, fsyncSync, lstatSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { randomBytes, type KeyObject } from 'node:crypto';
import { join } from 'node:path';
import { z } from 'zod';
import { canonicalJson, sha256Hex } from '../contracts/canonical.js';
import { fsyncDir } from '../common/durable-fs.js';
import { FusionError } from '../errors.js';
import { publicKeySha256, signUnsignedListDigest, verifyUnsignedListSignature, type SigningKey } from './signing.js';

export const UNSIGNED_BEFORE_KEY_FILE = 'signing-key.unsigned-before.json';
const SCHEMA = 'fusion.unsigned-before-key.v1';
const HEX64 = z.string().regex(/^[0-9a-f]{64}$/);

const ListSchema = z.strictObject({
  schema_version: z.literal(SCHEMA),
  created_at: z.string().datetime(),
  public_key_sha256: HEX64,
  tasks: z.array(z.strictObject({ task_id: z.string().min(1), tarball_sha256: HEX64 })),
  signature: z.string().min(1),
});

/** The signed list, as loaded and checked against the key. */
export interface UnsignedBeforeKey {
  file: string;
  /** When the signing key was created (ISO 8601). */
  createdAt: string;
  publicKeySha256: string;
  /** Task id → sha256 of the unsigned tarball it had when the key was created. */
  tasks: ReadonlyMap<string, string>;
}

export function unsignedBeforeKeyPath(home: string): string {
  return join(home, UNSIGNED_BEFORE_KEY_FILE);
}

const listDigest = (body: Omit<z.infer<typeof ListSchema>, 'signature'>): string => sha256Hex(canonicalJson(body));

/**
 * Writes the list for a key being created (replacing a list a removed key left), whole or not
 * at all: a temporary file, fsynced, renamed over the name, and the directory fsynced.
 */
export function writeUnsignedBeforeKey(home: string, key: SigningKey, tasks: ReadonlyArray<{ taskId: string; sha256: string }>, createdAt: string): UnsignedBeforeKey {
  const body = {
    schema_version: SCHEMA,
    created_at: createdAt,
    public_key_sha256: key.publicKeySha256,
    tasks: [...tasks].sort((a, b) => (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0)).map((t) => ({ task_id: t.taskId, tarball_sha256: t.sha256 })),
  } as const;
  const text = `${canonicalJson({ ...body, signature: signUnsignedListDigest(listDigest(body), key.privateKey) })}\n`;
  const file = unsignedBeforeKeyPath(home);
  const temp = `${file}.tmp-${randomBytes(6).toString('hex')}`;
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  try {
    try {
      writeSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, file);
  } catch (err) {
    rmSync(temp, { force: true });
    throw err;
  }
  fsyncDir(home);
  return { file, createdAt, publicKeySha256: key.publicKeySha256, tasks: new Map(tasks.map((t) => [t.taskId, t.sha256])) };
}

function unusable(file: string, why: string): FusionError {
  return new FusionError(
    'invalid_config',
    `${file} (the tasks sealed unsigned before the signing key was created) ${why}; restore it from a backup, or remove it: the tasks it listed are then refused as unsigned`,
    { details: { path: file } },
  );
}

/**
 * The list beside the key of `home`, checked against `publicKey`; null when there is none (a key
 * created with no task sealed before it by an older version). A list that is not a regular file,
 * does not parse or is not signed by this key is refused: whoever could change it could add a
 * task whose signature was stripped.
 */
export function loadUnsignedBeforeKey(home: string, publicKey: KeyObject): UnsignedBeforeKey | null {
  const file = unsignedBeforeKeyPath(home);
  try {
    if (!lstatSync(file).isFile()) throw unusable(file, 'is not a regular file');
  } catch (err) {
    if (err instanceof FusionError) throw err;
    return null;
  }
  let parsed;
  try {
    parsed = ListSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
  } catch {
    throw unusable(file, 'is not valid JSON');
  }
  if (!parsed.success) throw unusable(file, `is invalid: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  const { signature, ...body } = parsed.data;
  const keyId = publicKeySha256(publicKey);
  if (body.public_key_sha256 !== keyId) throw unusable(file, `was signed by key sha256:${body.public_key_sha256}, not by this signing key sha256:${keyId}`);
  if (!verifyUnsignedListSignature(listDigest(body), signature, publicKey)) throw unusable(file, 'does not verify: its signature is not the signing key\'s over its content');
  return { file, createdAt: body.created_at, publicKeySha256: keyId, tasks: new Map(body.tasks.map((t) => [t.task_id, t.tarball_sha256])) };
}

/** How a tarball without a signature stands against the list: listed with these bytes, or why not. */
export function unsignedStanding(list: UnsignedBeforeKey | null, taskId: string, tarballSha256: string): { listed: true } | { listed: false; why: string } {
  if (list === null) return { listed: false, why: 'no list of tasks sealed before the signing key exists' };
  const recorded = list.tasks.get(taskId);
  if (recorded === undefined) return { listed: false, why: `the task is not among the tasks sealed before the signing key was created (${list.createdAt})` };
  if (recorded !== tarballSha256) return { listed: false, why: `its tarball (sha256 ${tarballSha256.slice(0, 16)}…) differs from the one recorded when the signing key was created (${recorded.slice(0, 16)}…)` };
  return { listed: true };
}
