/**
 * The test-process DNS guard (test/setup/no-system-dns.ts) refuses system lookups of real names,
 * through every import style the code uses, and leaves localhost and IP literals alone.
 */
import dns from 'node:dns';
import { lookup } from 'node:dns/promises';
import { describe, expect, it } from 'vitest';

describe('no system DNS in tests', () => {
  it('refuses a real name through node:dns/promises and the callback API', async () => {
    await expect(lookup('fusion-test-never-resolved.invalid', { all: true })).rejects.toMatchObject({ code: 'ENOTFOUND', message: expect.stringMatching(/test rule/) });
    const err = await new Promise<NodeJS.ErrnoException | null>((resolve) => dns.lookup('fusion-test-never-resolved.invalid', (e) => resolve(e)));
    expect(err?.message).toMatch(/test rule/);
  });

  it('leaves IP literals and localhost alone', async () => {
    await expect(lookup('127.0.0.1')).resolves.toMatchObject({ address: '127.0.0.1' });
    await expect(lookup('localhost')).resolves.toHaveProperty('address');
  });
});
