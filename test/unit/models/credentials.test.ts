import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { redactSecrets } from '../../../src/contracts/secret-redaction.js';
import { credentialFromEnv, credentialFromFile, redactKey } from '../../../src/models/credentials.js';

const KEY = 'sk-SENTINEL-unit-0123456789abcdefABCDEF';
let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'fusion-cred-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('credentials', () => {
  it('reads a key from the given env, trimmed; blank counts as unset', () => {
    const c = credentialFromEnv('MY_KEY', { MY_KEY: `  ${KEY}\n` })!;
    expect(c.source).toBe('env MY_KEY');
    expect(c.use((k) => k)).toBe(KEY);
    expect(credentialFromEnv('MY_KEY', { MY_KEY: '   ' })).toBeUndefined();
    expect(credentialFromEnv('MY_KEY', {})).toBeUndefined();
  });

  it('never shows the key through JSON, inspect, keys or spread', () => {
    const c = credentialFromEnv('MY_KEY', { MY_KEY: KEY })!;
    expect(JSON.stringify(c)).toBe('{"credential":"env MY_KEY"}');
    expect(inspect(c, { showHidden: true, depth: 10 })).toBe('[Credential env MY_KEY]');
    expect(JSON.stringify({ ...c })).not.toContain(KEY);
    expect(Object.values(c).join(' ')).not.toContain(KEY);
  });

  it('accepts a 0600 key file and refuses a group/world-readable one with the chmod to run', () => {
    const file = join(dir, 'openai.key');
    writeFileSync(file, `${KEY}\n`);
    chmodSync(file, 0o600);
    expect(credentialFromFile(file).use((k) => k)).toBe(KEY);
    expect(credentialFromFile(file).source).toBe(`file ${file}`);
    chmodSync(file, 0o644);
    expect(() => credentialFromFile(file)).toThrow(
      expect.objectContaining({ code: 'invalid_config', message: `API key file ${file} has mode 0644 and is readable by group or others; run: chmod 600 ${file}` }),
    );
    chmodSync(file, 0o640);
    expect(() => credentialFromFile(file)).toThrow(/chmod 600/);
    chmodSync(file, 0o400);
    expect(credentialFromFile(file).use((k) => k)).toBe(KEY);
  });

  it('refuses missing, empty, multi-line key files and directories', () => {
    expect(() => credentialFromFile(join(dir, 'nope'))).toThrow(`API key file ${join(dir, 'nope')} cannot be read: ENOENT`);
    const empty = join(dir, 'empty');
    writeFileSync(empty, '\n', { mode: 0o600 });
    expect(() => credentialFromFile(empty)).toThrow(`API key file ${empty} is empty`);
    const multi = join(dir, 'multi');
    writeFileSync(multi, 'one\ntwo\n', { mode: 0o600 });
    expect(() => credentialFromFile(multi)).toThrow('must hold only the key');
    expect(() => credentialFromFile(dir)).toThrow('is not a regular file');
  });

  it('redacts the key, its long fragments and key-shaped text', () => {
    const masked = `${KEY.slice(0, 12)}****${KEY.slice(-4)}`;
    const text = `bad key ${KEY}; you sent ${masked}; Authorization: Bearer abcdefghijkl; api_key=zzz123`;
    const out = redactKey(text, KEY);
    expect(out).not.toContain(KEY);
    expect(out).not.toContain(KEY.slice(0, 12));
    expect(out).not.toContain('abcdefghijkl');
    expect(out).not.toContain('zzz123');
    expect(redactSecrets('sk-proj-abc***xyz0 leaked')).toBe('[redacted] leaked');
  });
});
