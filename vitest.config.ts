import { defineConfig } from 'vitest/config';

/**
 * One vitest project per kind of test (docs/architecture.md#tests), each with the time its kind
 * may take: unit tests run pure code and fakes in-process, integration tests start real parts on
 * loopback (daemons, SQLite, fake servers), e2e tests start real sandboxes and whole workflows.
 * `vitest run` runs every project; `--project unit` (npm run test:unit) one kind.
 */
const KINDS = [
  { name: 'unit', dir: 'test/unit', timeoutMs: 30_000 },
  { name: 'integration', dir: 'test/integration', timeoutMs: 60_000 },
  { name: 'e2e', dir: 'test/e2e', timeoutMs: 180_000 },
] as const;

export default defineConfig({
  test: {
    // Fixture repositories contain their own *.test.ts files: they are data, not tests.
    exclude: ['test/fixtures/**', 'node_modules/**', 'dist/**'],
    pool: 'forks',
    // Builds dist/ once per run (test/global-setup.ts), before any project starts.
    globalSetup: ['test/global-setup.ts'],
    // Every test process: a system DNS lookup of a real name fails loudly (test/setup/no-system-dns.ts).
    setupFiles: ['test/setup/no-system-dns.ts'],
    reporters: ['default'],
    projects: KINDS.map((kind) => ({
      extends: true,
      test: {
        name: kind.name,
        include: [`${kind.dir}/**/*.test.ts`],
        testTimeout: kind.timeoutMs,
        hookTimeout: kind.timeoutMs,
      },
    })),
  },
});
