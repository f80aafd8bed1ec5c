/**
 * A throwaway PostgreSQL server for the store conformance suite and the cluster tests (one
 * implementation with `make cluster-demo`: scripts/throwaway-servers.mjs): initdb into a temp
 * dir, `postgres` on a random loopback port, one fresh database per `createDatabase()`.
 */
import { PG_ROOT, pgBinDir } from '../../scripts/throwaway-servers.mjs';

export { startPostgres, type PostgresServer } from '../../scripts/throwaway-servers.mjs';

/**
 * True when a PostgreSQL server can be started. With CI=true a missing server is an error (the
 * suites must not silently skip); locally the PostgreSQL variants skip LOUDLY with the reason.
 */
export function postgresAvailable(): boolean {
  if (pgBinDir() !== undefined) return true;
  const why = `no PostgreSQL server under ${PG_ROOT} (Debian package postgresql; scripts/setup-system.sh installs it)`;
  if (process.env.CI === 'true') throw new Error(`the PostgreSQL store tests need a server: ${why}`);
  process.stderr.write(`\n!!! SKIPPING the PostgreSQL variants of the store tests: ${why}\n\n`);
  return false;
}
