/**
 * A daemon loads only the optional peers its configuration chose (docs/architecture.md#optional-peers):
 * the real `fusion daemon` entry, started and stopped, reports from its module cache which of
 * sqlite3, pg and dockerode it loaded (test/fixtures/report-loaded-peers.cjs, preloaded).
 *
 *   - bwrap + SQLite: sqlite3, never pg or dockerode;
 *   - bwrap + PostgreSQL (--database-url, a throwaway loopback server): pg, never dockerode.
 *     sqlite3 is still loaded there, by the data directory lock alone (an fcntl lock SQLite
 *     holds, src/store/data-dir-lock.ts): one daemon per data directory whatever its store.
 *
 * Each daemon runs in a private mount namespace whose /run is an empty tmpfs: a host without a
 * Docker engine, so nothing (the start-up reaping of a predecessor's containers, the uid pool's
 * container probe) has a reason to reach Docker. Each is sent SIGTERM the moment it prints that
 * it listens, and must still stop gracefully (the report is written at its exit): this also pins
 * that `fusion daemon` installs its signal handlers before that line (before, a stop sent on it
 * often killed the daemon outright). Needs root (unshare, mount) and a built dist/.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeUnless, missingPrerequisite } from '../../helpers/gates.js';
import { CLI, startCommand } from '../../helpers/cli.js';
import { postgresAvailable, startPostgres, type PostgresServer } from '../../setup/postgres-server.js';

const missing = missingPrerequisite({ root: true, bwrap: true, dist: true });
const REPORTER = join(__dirname, '..', '..', 'fixtures', 'report-loaded-peers.cjs');

interface Loaded {
  sqlite3: boolean;
  pg: boolean;
  dockerode: boolean;
}

describeUnless(missing, 'a daemon loads only the optional peers its configuration chose', () => {
  let base = '';
  let postgres: PostgresServer | undefined;

  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), 'fusion-peers-'));
    if (postgresAvailable()) postgres = await startPostgres();
  }, 60_000);
  afterAll(async () => {
    await postgres?.stop();
    rmSync(base, { recursive: true, force: true });
  });

  /** Starts `fusion daemon ARGS` with /run hidden, waits until it listens, stops it; what it loaded. */
  async function peersOf(name: string, args: readonly string[]): Promise<Loaded> {
    const home = join(base, name);
    const script = 'mount -t tmpfs -o mode=0755 tmpfs /run && exec "$@"';
    const daemon = startCommand('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', script, 'sh', process.execPath, '--require', REPORTER, CLI,
      'daemon', '--data', home, '--socket', join(home, 'fusion.sock'), '--sandbox', 'bwrap', '--log-level', 'warn', ...args]);
    try {
      await daemon.waitForText('stderr', /fusion daemon listening on/u, `the ${name} daemon to listen`, 60_000);
    } finally {
      await daemon.stop('SIGTERM', 30_000);
    }
    const exit = await daemon.closed;
    const line = /loaded-peers (\{.*\})/u.exec(daemon.stderr());
    expect(line, `${JSON.stringify(exit)} ${daemon.stderr()}`).not.toBeNull();
    return JSON.parse(line![1]!) as Loaded;
  }

  it('bwrap + SQLite: sqlite3 only, neither pg nor dockerode', async () => {
    expect(await peersOf('sqlite', [])).toEqual({ sqlite3: true, pg: false, dockerode: false });
  }, 120_000);

  it('bwrap + PostgreSQL: pg, not dockerode (sqlite3 for the data directory lock only)', async (ctx) => {
    if (postgres === undefined) return ctx.skip();
    const url = await postgres.createDatabase();
    expect(await peersOf('postgres', ['--database-url', url])).toEqual({ sqlite3: true, pg: true, dockerode: false });
  }, 120_000);
});
