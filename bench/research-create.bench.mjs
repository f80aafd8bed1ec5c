// Research create latency (direct dispatch) against a floor measured in the same run.
//
//   create   POST /api/v1/research over the TCP listener with a fresh Idempotency-Key and a
//            blocked source (http://127.0.0.1:9/: refused by the egress guard before any
//            connection), so the run executes in the request and ends `failed`: key check, run
//            insert, claim and failure, each a committed SQLite transaction (WAL, synchronous=FULL)
//   health   GET /v1/health round trip on the same listener (HTTP + JSON over loopback TCP)
//   insert   one bare fsync'd SQLite insert (sqlite3 package, WAL, synchronous=FULL) of a row the
//            size of a run row, in its own database in the same directory
//   floor    health_p50 + insert_p50; goal: create_p50 / floor_p50 ≤ 2
//
// The daemon is in-process (dist/). Measurements are interleaved (rotating order) so drift
// affects them alike. Env: BENCH_CREATES (default 200), BENCH_SHORT=1 (40), BENCH_HOME_DIR.
import process from 'node:process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { interleaved, openFloorDb, sqliteRun, stats } from './floor.mjs';
import { fetch } from 'undici';

const N = Number(process.env.BENCH_CREATES ?? (process.env.BENCH_SHORT === '1' ? 40 : 200));
const WARMUP = process.env.BENCH_SHORT === '1' ? 5 : 20;
const GOAL_RATIO = 2;



export default async function run() {
  const { startDaemon, buildConfig } = await import('../dist/src/main.js');
  const { silentLogger } = await import('../dist/src/log.js');
  const { issueKey } = await import('../dist/src/research/api-keys.js');
  const { openResearchSqliteStore } = await import('../dist/src/store/research-sqlite-store.js');

  const home = mkdtempSync(join(process.env.BENCH_HOME_DIR ?? tmpdir(), 'fusion-bench-research-'));
  const runner = { run: () => Promise.reject(new Error('no tasks in this bench')) };
  const daemon = await startDaemon(buildConfig({ home, socketPath: join(home, 'fusion.sock'), logLevel: 'silent', listen: '127.0.0.1:0' }), { runner, log: silentLogger() });
  const keyStore = await openResearchSqliteStore({ file: daemon.researchDbFile, log: silentLogger() });
  const { key } = await issueKey(keyStore, 'ws_bench', 'workspace');
  await keyStore.close();
  const base = `http://127.0.0.1:${daemon.tcp.port}`;
  const db = await openFloorDb(join(home, 'floor.db'));
  const body = JSON.stringify({ query: 'token bucket rate limiting', sourceUrls: ['http://127.0.0.1:9/blocked'] });
  const payload = JSON.stringify({ query: 'token bucket rate limiting', sourceUrls: ['http://127.0.0.1:9/blocked'], limits: { maxPages: 20 }, pad: 'x'.repeat(200) });

  const create = [];
  const health = [];
  const insert = [];
  let seq = 0;
  const ops = {
    async create(record) {
      seq += 1;
      const t0 = performance.now();
      const res = await fetch(`${base}/api/v1/research`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'idempotency-key': `bench-${seq}`, 'content-type': 'application/json' }, body });
      const reply = await res.json();
      const dt = performance.now() - t0;
      if (res.status !== 202 || reply.run.status !== 'failed') throw new Error(`create answered ${res.status}: ${JSON.stringify(reply)}`);
      if (record) create.push(dt);
    },
    async health(record) {
      const t0 = performance.now();
      const res = await fetch(`${base}/v1/health`);
      await res.json();
      const dt = performance.now() - t0;
      if (res.status !== 200) throw new Error(`health answered ${res.status}`);
      if (record) health.push(dt);
    },
    async insert(record) {
      seq += 1;
      const t0 = performance.now();
      await sqliteRun(db, 'INSERT INTO rows (id, payload, created_at) VALUES (?, ?, ?)', [`row-${seq}`, payload, new Date().toISOString()]);
      const dt = performance.now() - t0;
      if (record) insert.push(dt);
    },
  };
  try {
    await interleaved(ops, WARMUP, N);
  } finally {
    await new Promise((resolve) => db.close(() => resolve()));
    await daemon.close();
    rmSync(home, { recursive: true, force: true });
  }
  const c = stats(create);
  const h = stats(health);
  const ins = stats(insert);
  const floorP50 = Math.round((h.p50 + ins.p50) * 1000) / 1000;
  const ratioP50 = Math.round((c.p50 / floorP50) * 100) / 100;
  return {
    unit: 'ms',
    creates: N,
    filesystem: process.env.BENCH_HOME_DIR ?? tmpdir(),
    create_ms: c,
    health_ms: h,
    sqlite_insert_ms: ins,
    floor_p50_ms: floorP50,
    ratio_p50: ratioP50,
    goal_ratio_p50: GOAL_RATIO,
    meets_goal: ratioP50 <= GOAL_RATIO,
  };
}
