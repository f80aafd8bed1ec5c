import { chmodSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { initSigningKey, loadSigningKey, parsePublicKey, signManifestDigest, signingKeyPaths, verifyManifestSignature } from '../../../src/audit/signing.js';

const DIGEST = 'a'.repeat(64);
const homes: string[] = [];
const home = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'fusion-sign-'));
  homes.push(dir);
  return dir;
};
afterEach(() => {
  for (const h of homes.splice(0)) rmSync(h, { recursive: true, force: true });
});

describe('Ed25519 task tarball signing', () => {
  it('creates the private key 0600 in the data dir and loads it back', () => {
    const h = home();
    const created = initSigningKey(h);
    expect(statSync(signingKeyPaths(h).privateKey).mode & 0o777).toBe(0o600);
    const loaded = loadSigningKey(h)!;
    expect(loaded.publicKeySha256).toBe(created.publicKeySha256);
    expect(loaded.publicKeyPem).toMatch(/^-----BEGIN PUBLIC KEY-----/);
  });

  it('never replaces an existing key, and has none until one is created', () => {
    const h = home();
    expect(loadSigningKey(h)).toBeNull();
    initSigningKey(h);
    expect(() => initSigningKey(h)).toThrow(/already exists/);
  });

  it('a refused init (public key path already taken, e.g. a symlink) leaves no private key behind', () => {
    const h = home();
    symlinkSync(join(h, 'elsewhere.pem'), signingKeyPaths(h).publicKey);
    expect(() => initSigningKey(h)).toThrow(/exists without a private key/);
    expect(loadSigningKey(h)).toBeNull();
  });

  it('refuses a private key readable by others', () => {
    const h = home();
    initSigningKey(h);
    chmodSync(signingKeyPaths(h).privateKey, 0o644);
    expect(() => loadSigningKey(h)).toThrow(/must be mode 0600/);
  });

  it('verifies its own signature, and not another key, digest or a mangled signature', () => {
    const a = initSigningKey(home());
    const b = initSigningKey(home());
    const sig = signManifestDigest(DIGEST, a.privateKey);
    expect(verifyManifestSignature(DIGEST, sig, a.publicKey)).toBe(true);
    expect(verifyManifestSignature(DIGEST, sig, parsePublicKey(a.publicKeyPem))).toBe(true);
    expect(verifyManifestSignature(DIGEST, sig, b.publicKey)).toBe(false);
    expect(verifyManifestSignature('b'.repeat(64), sig, a.publicKey)).toBe(false);
    const raw = Buffer.from(sig, 'base64');
    raw[0]! ^= 1;
    expect(verifyManifestSignature(DIGEST, raw.toString('base64'), a.publicKey)).toBe(false);
    expect(verifyManifestSignature(DIGEST, `${sig}=`, a.publicKey)).toBe(false);
  });

  it('parses only Ed25519 public keys', () => {
    expect(() => parsePublicKey('not a key')).toThrow(/not a PEM public key/);
  });
});
