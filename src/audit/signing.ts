/**
 * Ed25519 signing of task tarballs. The private key lives in the data directory (0600, created
 * by `fusion keys signing-init`); the public key is printable so an auditor can pin it and
 * verify an exported tarball offline, on another machine, without any secret.
 *
 * What is signed is the manifest digest with a domain prefix, so a signature made here can
 * never be presented as a signature over some other kind of message.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { constants, fchmodSync, fstatSync, linkSync, lstatSync, openSync, closeSync, writeSync, fsyncSync, readFileSync, unlinkSync, type Stats } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { FusionError } from '../errors.js';
import { fsyncDir } from '../common/durable-fs.js';
import { sha256Hex } from '../contracts/sha256.js';

export const SIGNING_KEY_FILE = 'signing-key.pem';
export const SIGNING_PUBLIC_KEY_FILE = 'signing-key.pub.pem';
const CONTEXT = 'fusion.task-tarball.manifest.v1\0';
/** The context of the signed list of tasks sealed unsigned before the key (unsigned-before-key.ts). */
const LIST_CONTEXT = 'fusion.unsigned-before-key.v1\0';
const HEX64 = /^[0-9a-f]{64}$/;

export interface SigningKey {
  privateKey: KeyObject;
  publicKey: KeyObject;
  /** sha256 of the public key's DER (SPKI) encoding: the key id stored with each signature. */
  publicKeySha256: string;
  publicKeyPem: string;
}

export function signingKeyPaths(home: string): { privateKey: string; publicKey: string } {
  return { privateKey: join(home, SIGNING_KEY_FILE), publicKey: join(home, SIGNING_PUBLIC_KEY_FILE) };
}

export function publicKeySha256(key: KeyObject): string {
  return sha256Hex(key.export({ type: 'spki', format: 'der' }));
}

/**
 * Writes `file` whole or not at all: the text goes to a fresh temporary name (O_EXCL, the final
 * mode set on the descriptor whatever the umask), is fsynced, and is then hard-linked to its
 * name, which fails if the name exists. A crash leaves at most a `.tmp-…` file, never a
 * half-written key under the key's name (which init would refuse and load could not parse).
 */
function writeAtomicExclusive(file: string, text: string, mode: number): void {
  const temp = `${file}.tmp-${randomBytes(6).toString('hex')}`;
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  try {
    try {
      fchmodSync(fd, mode);
      writeSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    linkSync(temp, file);
  } finally {
    unlinkSync(temp);
  }
}

/**
 * Creates the key pair in `home`. Refuses to replace an existing key: signatures already stored
 * would stop verifying, which must be a deliberate act (remove the file first). `beforeWrite`
 * runs with the new key before its files exist (to write what the key signs at its creation),
 * so a crash leaves either no key or a key with that record beside it.
 */
export function initSigningKey(home: string, beforeWrite?: (key: SigningKey) => void): SigningKey {
  const paths = signingKeyPaths(home);
  if (exists(paths.privateKey)) {
    throw new FusionError('conflict', `a signing key already exists at ${paths.privateKey}; remove it first to replace it (older signatures will no longer verify)`);
  }
  // Checked before anything is written: a refused init must not leave a private key behind.
  if (exists(paths.publicKey)) throw new FusionError('conflict', `${paths.publicKey} exists without a private key; remove it first`);
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const privatePem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const publicPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  const key: SigningKey = { privateKey, publicKey, publicKeySha256: publicKeySha256(publicKey), publicKeyPem: publicPem };
  beforeWrite?.(key);
  writeAtomicExclusive(paths.privateKey, privatePem, 0o600);
  writeAtomicExclusive(paths.publicKey, publicPem, 0o644);
  fsyncDir(home);
  return key;
}

function exists(file: string): boolean {
  try {
    lstatSync(file);
    return true;
  } catch {
    return false;
  }
}

export interface LoadSigningKeyOptions {
  /**
   * Refuse a key another uid owns (default true: whoever signs must own the key, as ssh
   * requires). Off only for reading the public half, e.g. root verifying a daemon's tasks.
   */
  requireOwner?: boolean;
}

/**
 * Like ssh with a private key: a key that another uid owns (it could swap it for its own, and
 * sign as this daemon) or that group or others may read or write is refused, naming the path
 * and the fix. The checks run on the descriptor the key is read from, so a file swapped after
 * the check is never the one used.
 */
function assertPrivateKeyFile(file: string, st: Stats, requireOwner: boolean): void {
  if (!st.isFile()) throw new FusionError('invalid_config', `signing key ${file} is not a regular file`, { details: { path: file } });
  const uid = process.geteuid?.();
  if (requireOwner && uid !== undefined && st.uid !== uid) {
    throw new FusionError('invalid_config', `signing key ${file} is owned by uid ${st.uid}, not by the daemon's uid ${uid}; chown ${uid} ${file} (or create the key as the daemon's user with fusion keys signing-init)`, { details: { path: file, ownerUid: st.uid, daemonUid: uid } });
  }
  if ((st.mode & 0o077) !== 0) {
    throw new FusionError('invalid_config', `signing key ${file} must be mode 0600 (is ${(st.mode & 0o777).toString(8)}): group and others may not read or write it; chmod 600 ${file}`, { details: { path: file, mode: (st.mode & 0o777).toString(8) } });
  }
}

/** The configured key of `home`, or null when none was created. See assertPrivateKeyFile for what is refused. */
export function loadSigningKey(home: string, options: LoadSigningKeyOptions = {}): SigningKey | null {
  const paths = signingKeyPaths(home);
  let st;
  try {
    st = lstatSync(paths.privateKey);
  } catch {
    return null;
  }
  // lstat first: a symlink is refused by name rather than followed (O_NOFOLLOW below would only say ELOOP).
  assertPrivateKeyFile(paths.privateKey, st, options.requireOwner ?? true);
  let pem: Buffer;
  const fd = openSync(paths.privateKey, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    assertPrivateKeyFile(paths.privateKey, fstatSync(fd), options.requireOwner ?? true);
    pem = readFileSync(fd);
  } finally {
    closeSync(fd);
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(pem);
  } catch (err) {
    throw new FusionError('invalid_config', `signing key ${paths.privateKey} is not a readable private key`, { cause: err });
  }
  if (privateKey.asymmetricKeyType !== 'ed25519') throw new FusionError('invalid_config', `signing key ${paths.privateKey} is not an Ed25519 key`);
  const publicKey = createPublicKey(privateKey);
  return {
    privateKey,
    publicKey,
    publicKeySha256: publicKeySha256(publicKey),
    publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  };
}

/** Parses a PEM (SPKI) Ed25519 public key, e.g. the one `fusion keys signing-public` printed. */
export function parsePublicKey(pem: string | Buffer): KeyObject {
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch (err) {
    throw new FusionError('invalid_input', 'the public key is not a PEM public key', { cause: err });
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new FusionError('invalid_input', 'the public key is not an Ed25519 key');
  return key;
}

function signDigest(context: string, digest: string, key: KeyObject): string {
  if (!HEX64.test(digest)) throw new FusionError('internal_error', 'a signed digest must be a lowercase hex sha256');
  return sign(null, Buffer.from(context + digest, 'utf8'), key).toString('base64');
}

function verifyDigest(context: string, digest: string, signature: string, key: KeyObject): boolean {
  if (!HEX64.test(digest)) return false;
  const raw = Buffer.from(signature, 'base64');
  // Ed25519 signatures are 64 bytes; a non-canonical base64 text is refused too.
  if (raw.length !== 64 || raw.toString('base64') !== signature) return false;
  try {
    return verify(null, Buffer.from(context + digest, 'utf8'), key, raw);
  } catch {
    return false;
  }
}

/** Base64 Ed25519 signature over the manifest digest. */
export function signManifestDigest(manifestSha256: string, key: KeyObject): string {
  return signDigest(CONTEXT, manifestSha256, key);
}

export function verifyManifestSignature(manifestSha256: string, signature: string, key: KeyObject): boolean {
  return verifyDigest(CONTEXT, manifestSha256, signature, key);
}

/** Signature over the digest of the list of tasks sealed before the key (its own context: never valid as a manifest signature). */
export function signUnsignedListDigest(listSha256: string, key: KeyObject): string {
  return signDigest(LIST_CONTEXT, listSha256, key);
}

export function verifyUnsignedListSignature(listSha256: string, signature: string, key: KeyObject): boolean {
  return verifyDigest(LIST_CONTEXT, listSha256, signature, key);
}
