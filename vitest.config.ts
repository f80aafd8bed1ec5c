import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Fixture repositories contain their own *.test.ts files: they are data, not tests.
    exclude: ['test/fixtures/**', 'node_modules/**', 'dist/**'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    globalSetup: ['test/global-setup.ts'],
    // Every test process: a system DNS lookup of a real name fails loudly (test/setup/no-system-dns.ts).
    setupFiles: ['test/setup/no-system-dns.ts'],
    reporters: ['default'],
  },
});
