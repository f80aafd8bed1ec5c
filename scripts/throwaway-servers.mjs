// Throwaway PostgreSQL and Redis servers on random loopback ports, for the tests (through
// test/setup/postgres-server.ts and test/integration/research/helpers.ts) and `make cluster-demo`.
// Nothing is persisted: PostgreSQL runs without fsync in a temp dir removed by stop(), Redis
// without snapshots. initdb refuses root, so as root the cluster belongs to the `postgres` OS
// user (Debian's package creates it).
import process from 'node:process';
import { setTimeout, clearTimeout } from 'node:timers';
import { execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

export const PG_ROOT = '/usr/lib/postgresql';
export const REDIS_SERVER = '/usr/bin/redis-server';

/** The newest installed PostgreSQL server's bin directory, or undefined. */
export function pgBinDir() {
  if (!existsSync(PG_ROOT)) return undefined;
  const versions = readdirSync(PG_ROOT).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
  for (const v of versions) {
    const bin = join(PG_ROOT, v, 'bin');
    if (existsSync(join(bin, 'initdb')) && existsSync(join(bin, 'postgres'))) return bin;
  }
  return undefined;
}

export function freePort(host = '127.0.0.1') {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, host, () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Spawns `cmd` and resolves true once its output (stream `which`) contains `marker`. */
function waitReady(proc, which, marker, ms) {
  let text = '';
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    proc[which].on('data', (c) => {
      text += c.toString();
      if (text.includes(marker)) {
        clearTimeout(timer);
        resolve(true);
      }
    });
    proc.once('exit', () => {
      clearTimeout(timer);
      resolve(false);
    });
  });
}

function stopper(proc, signal, after = () => undefined) {
  return () => new Promise((resolve) => {
    const done = () => {
      after();
      resolve();
    };
    if (proc.exitCode !== null || proc.signalCode !== null) return done();
    proc.once('exit', done);
    proc.kill(signal);
  });
}

let dbCounter = 0;

export async function startPostgres() {
  const bin = pgBinDir();
  if (bin === undefined) throw new Error(`no PostgreSQL server under ${PG_ROOT} (Debian package postgresql)`);
  const dir = mkdtempSync(join(tmpdir(), 'fusion-pg-'));
  const data = join(dir, 'data');
  let ids = {};
  if (process.getuid?.() === 0) {
    ids = {
      uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim()),
      gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim()),
    };
    chownSync(dir, ids.uid, ids.gid);
  }
  execFileSync(join(bin, 'initdb'), ['-D', data, '-U', 'fusion', '--auth=trust', '-E', 'UTF8', '--no-sync', '--no-instructions'], {
    ...ids, stdio: ['ignore', 'ignore', 'pipe'], cwd: dir,
  });
  const launch = async (port) => {
    const proc = spawn(join(bin, 'postgres'), [
      '-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off',
      '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=200', '-c', 'shared_buffers=32MB',
    ], { ...ids, stdio: ['ignore', 'ignore', 'pipe'], cwd: dir });
    if (!(await waitReady(proc, 'stderr', 'ready to accept connections', 20_000))) {
      proc.kill('SIGKILL');
      return undefined;
    }
    proc.stderr.resume();
    return proc;
  };
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    let proc = await launch(port);
    if (proc === undefined) continue;
    const adminUrl = `postgres://fusion@127.0.0.1:${port}/postgres`;
    return {
      port,
      adminUrl,
      /** Stops the server (fast shutdown: clients are disconnected), keeping its data (chaos tests). */
      halt: () => stopper(proc, 'SIGINT')(),
      /** Starts the halted server again on the same port and data. */
      async resume() {
        const next = await launch(port);
        if (next === undefined) throw new Error(`postgres did not start again on port ${port}`);
        proc = next;
      },
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
      // SIGINT: PostgreSQL's fast shutdown (disconnects clients); then the directory goes.
      stop: () => stopper(proc, 'SIGINT', () => rmSync(dir, { recursive: true, force: true }))(),
    };
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error('could not start postgres on a loopback port');
}

async function launchRedis(port) {
  const proc = spawn(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'yes'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (!(await waitReady(proc, 'stdout', 'Ready to accept connections', 10_000))) {
    proc.kill('SIGKILL');
    return undefined;
  }
  proc.stdout.resume();
  return proc;
}

export async function startRedis() {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const first = await launchRedis(port);
    if (first === undefined) continue;
    const server = {
      url: `redis://127.0.0.1:${port}`,
      port,
      proc: first,
      stop: () => stopper(server.proc, 'SIGTERM')(),
      /** SIGKILLs the server (no persistence: its data is gone); `resume` starts it again, empty. */
      kill: () => stopper(server.proc, 'SIGKILL')(),
      async resume() {
        const next = await launchRedis(port);
        if (next === undefined) throw new Error(`redis-server did not start again on port ${port}`);
        server.proc = next;
      },
    };
    return server;
  }
  throw new Error('could not start redis-server on a loopback port');
}
