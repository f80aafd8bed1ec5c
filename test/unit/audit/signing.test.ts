import { chmodSync, chownSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
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

describe('signing key file checks (as ssh does)', () => {
  it('refuses a key group or others may read or write, naming the path and the fix', () => {
    for (const mode of [0o640, 0o620, 0o604, 0o602, 0o660]) {
      const h = home();
      initSigningKey(h);
      const file = signingKeyPaths(h).privateKey;
      chmodSync(file, mode);
      let caught: any;
      try {
        loadSigningKey(h);
      } catch (err) {
        caught = err;
      }
      expect(caught?.code, mode.toString(8)).toBe('invalid_config');
      expect(caught.message).toContain(file);
      expect(caught.message).toContain(`chmod 600 ${file}`);
    }
  });

  it('refuses a key another uid owns (unless only its public half is wanted), naming the owner and chown', () => {
    const h = home();
    initSigningKey(h);
    const file = signingKeyPaths(h).privateKey;
    const real = process.geteuid!;
    // The file's owner cannot be changed without root: the daemon's uid is made another instead.
    const spy = vi.spyOn(process, 'geteuid').mockReturnValue(real() + 1);
    try {
      expect(() => loadSigningKey(h)).toThrow(new RegExp(`signing key ${file} is owned by uid ${real()}, not by the daemon's uid ${real() + 1}; chown ${real() + 1} `));
      expect(loadSigningKey(h, { requireOwner: false })?.publicKeyPem).toMatch(/BEGIN PUBLIC KEY/);
    } finally {
      spy.mockRestore();
    }
    expect(loadSigningKey(h)).not.toBeNull();
  });

  it('a key chowned to another uid is refused (for real when the test runs as root; as above otherwise)', () => {
    const h = home();
    initSigningKey(h);
    const file = signingKeyPaths(h).privateKey;
    if (process.geteuid?.() === 0) chownSync(file, 12345, 12345);
    const spy = process.geteuid?.() === 0 ? undefined : vi.spyOn(process, 'geteuid').mockReturnValue(process.geteuid!() + 1);
    try {
      expect(() => loadSigningKey(h)).toThrow(/is owned by uid \d+, not by the daemon's uid/);
    } finally {
      spy?.mockRestore();
    }
  });

  it('refuses a symlink in place of the key', () => {
    const h = home();
    const other = home();
    initSigningKey(other);
    symlinkSync(signingKeyPaths(other).privateKey, signingKeyPaths(h).privateKey);
    expect(() => loadSigningKey(h)).toThrow(/is not a regular file/);
  });

  it('creates the key 0600 whatever the umask, atomically: no temporary file is left and a half-written key never has the name', () => {
    const h = home();
    const old = process.umask(0o000);
    try {
      initSigningKey(h);
    } finally {
      process.umask(old);
    }
    expect(statSync(signingKeyPaths(h).privateKey).mode & 0o777).toBe(0o600);
    expect(readdirSync(h).sort()).toEqual(['signing-key.pem', 'signing-key.pub.pem']);
    expect(readFileSync(signingKeyPaths(h).privateKey, 'utf8')).toMatch(/^-----BEGIN PRIVATE KEY-----\n[\s\S]+-----END PRIVATE KEY-----\n$/);
  });
});
