/**
 * A throwaway PostgreSQL server for the store conformance suite and the cluster tests: initdb
 * into a temp dir, `postgres` on a random loopback port (trust auth, no fsync: test data only),
 * one fresh database per `createDatabase()`, everything removed by `stop()`. initdb refuses
 * root, so as root the cluster belongs to the `postgres` OS user (Debian's package creates it).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

const PG_ROOT = '/usr/lib/postgresql';

/** The newest installed server's bin directory, or undefined. */
function pgBinDir(): string | undefined {
  if (!existsSync(PG_ROOT)) return undefined;
  const versions = readdirSync(PG_ROOT).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
  for (const v of versions) {
    const bin = join(PG_ROOT, v, 'bin');
    if (existsSync(join(bin, 'initdb')) && existsSync(join(bin, 'postgres'))) return bin;
  }
  return undefined;
}

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

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

export interface PostgresServer {
  port: number;
  /** URL of the `postgres` maintenance database. */
  adminUrl: string;
  /** A new, empty database; its URL. */
  createDatabase(): Promise<string>;
  /** SIGKILL-free stop (fast shutdown), then the data directory is removed. */
  stop(): Promise<void>;
}

function owner(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  return { uid, gid };
}

let dbCounter = 0;

export async function startPostgres(): Promise<PostgresServer> {
  const bin = pgBinDir();
  if (bin === undefined) throw new Error('PostgreSQL server binaries are missing');
  const dir = mkdtempSync(join(tmpdir(), 'fusion-pg-'));
  const data = join(dir, 'data');
  const as = owner();
  if (as !== undefined) chownSync(dir, as.uid, as.gid);
  const ids = as === undefined ? {} : { uid: as.uid, gid: as.gid };
  execFileSync(join(bin, 'initdb'), ['-D', data, '-U', 'fusion', '--auth=trust', '-E', 'UTF8', '--no-sync', '--no-instructions'], {
    ...ids, stdio: ['ignore', 'ignore', 'pipe'], cwd: dir,
  });
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const proc: ChildProcess = spawn(join(bin, 'postgres'), [
      '-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off',
      '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=200', '-c', 'shared_buffers=32MB',
    ], { ...ids, stdio: ['ignore', 'ignore', 'pipe'], cwd: dir });
    let err = '';
    const ready = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 20_000);
      proc.stderr!.on('data', (c: Buffer) => {
        err += c.toString();
        if (err.includes('ready to accept connections')) {
          clearTimeout(timer);
          resolve(true);
        }
      });
      proc.once('exit', () => {
        clearTimeout(timer);
        resolve(false);
      });
    });
    if (!ready) {
      proc.kill('SIGKILL');
      continue;
    }
    proc.stderr!.resume();
    const adminUrl = `postgres://fusion@127.0.0.1:${port}/postgres`;
    return {
      port,
      adminUrl,
      async createDatabase() {
        dbCounter += 1;
        const name = `fusion_${process.pid}_${dbCounter}`;
        const client = new pg.Client({ connectionString: adminUrl });
        await client.connect();
        try {
          await client.query(`CREATE DATABASE ${name}`);
        } finally {
          await client.end();
        }
        return `postgres://fusion@127.0.0.1:${port}/${name}`;
      },
      stop: () =>
        new Promise<void>((resolve) => {
          const done = (): void => {
            rmSync(dir, { recursive: true, force: true });
            resolve();
          };
          if (proc.exitCode !== null || proc.signalCode !== null) return done();
          proc.once('exit', done);
          proc.kill('SIGINT'); // fast shutdown: disconnects clients, no waiting for them
        }),
    };
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error('could not start postgres on a loopback port');
}
