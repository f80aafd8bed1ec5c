// Receipt latency (docs/behaviour.md#f1) over the daemon's Unix socket, against a floor measured in the same
// run on the same filesystem.
//
//   receipt  POST /v1/tasks/investigate round trip (durable preflight: task dir, canonical input
//            and budget plan fsynced, the task row committed in SQLite WAL + synchronous=FULL)
//   health   GET /v1/health round trip on the same socket (HTTP + JSON over the socket)
//   insert   one bare fsync'd SQLite insert (sqlite3 package, WAL, synchronous=FULL) of a row the
//            size of a task row, in its own database in the same home directory
//   floor    health_p50 + insert_p50; goal: receipt_p50 / floor_p50 ≤ 2
//   files    (diagnostic, not part of the floor) the preflight's durable files alone: the task
//            directory and two small files written with the daemon's own mkdirDurable /
//            writeFileDurable (each fsyncs the file and its directory)
//
// The daemon is in-process (dist/) with a runner that does nothing until cancelled, so no
// sandbox starts and only the receipt path is measured. The three measurements are interleaved
// (rotating order) so drift affects them alike.
//
// Env: BENCH_RECEIPTS (default 200), BENCH_HOME_DIR (default the OS temp dir).
import { iterations as iterationCount } from './short.mjs';
import process from 'node:process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { interleaved, openFloorDb, sqliteRun, stats } from './floor.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const N = iterationCount('BENCH_RECEIPTS', 200, 40);
const WARMUP = 20;
const GOAL_RATIO = 2;




export default async function run() {
  const { startDaemon, buildConfig } = await import('../dist/src/main.js');
  const { silentLogger } = await import('../dist/src/log.js');
  const { FusionClient } = await import('../dist/src/client/index.js');
  const { mkdirDurable, writeFileDurable } = await import('../dist/src/common/durable-fs.js');

  const home = mkdtempSync(join(process.env.BENCH_HOME_DIR ?? tmpdir(), 'fusion-bench-receipt-'));
  // Does nothing until the daemon stops (or the task is cancelled).
  const runner = {
    run: ({ signal }) =>
      new Promise((_resolve, reject) => {
        signal.addEventListener('abort', () => reject(new Error(`stopped: ${String(signal.reason)}`)), { once: true });
      }),
  };
  const daemon = await startDaemon(buildConfig({ home, socketPath: join(home, 'fusion.sock'), logLevel: 'silent' }), { runner, log: silentLogger() });
  const client = new FusionClient(daemon.socketPath);
  const db = await openFloorDb(join(home, 'floor.db'));
  const args = {
    objective: 'Find where the task state machine and its transition table are implemented',
    background: ['The daemon moves each Fusion task through the states of docs/behaviour.md#b2'],
    deliverable: 'The file and lines that define the states and allowed transitions',
  };
  // A row the size of a task row (canonical input + plan + ids).
  const payload = JSON.stringify({ args, cwd: ROOT, plan: 'x'.repeat(300) });

  const receipt = [];
  const health = [];
  const insert = [];
  const files = [];
  let seq = 0;
  const ops = {
    async receipt(record) {
      const t0 = performance.now();
      const reply = await client.raw('POST', '/v1/tasks/investigate', { arguments: args, repo: ROOT });
      const dt = performance.now() - t0;
      if (reply.status !== 202) throw new Error(`submit answered ${reply.status}: ${JSON.stringify(reply.body)}`);
      if (record) receipt.push(dt);
    },
    async health(record) {
      const t0 = performance.now();
      const reply = await client.raw('GET', '/v1/health');
      const dt = performance.now() - t0;
      if (reply.status !== 200) throw new Error(`health answered ${reply.status}`);
      if (record) health.push(dt);
    },
    async insert(record) {
      seq += 1;
      const t0 = performance.now();
      await sqliteRun(db, 'INSERT INTO rows (id, payload, created_at) VALUES (?, ?, ?)', [`row-${seq}`, payload, new Date().toISOString()]);
      const dt = performance.now() - t0;
      if (record) insert.push(dt);
    },
    async files(record) {
      seq += 1;
      const dir = join(home, 'files', `task-${seq}`);
      const t0 = performance.now();
      mkdirDurable(dir, 0o700);
      writeFileDurable(join(dir, 'canonical-input.json'), payload);
      writeFileDurable(join(dir, 'budget-plan.json'), 'x'.repeat(300));
      const dt = performance.now() - t0;
      if (record) files.push(dt);
    },
  };
  try {
    await interleaved(ops, WARMUP, N);
  } finally {
    await new Promise((resolve) => db.close(() => resolve()));
    await daemon.close();
    rmSync(home, { recursive: true, force: true });
  }

  const r = stats(receipt);
  const h = stats(health);
  const ins = stats(insert);
  const floorP50 = Math.round((h.p50 + ins.p50) * 1000) / 1000;
  const floorP99 = Math.round((h.p99 + ins.p99) * 1000) / 1000;
  const ratioP50 = Math.round((r.p50 / floorP50) * 100) / 100;
  return {
    unit: 'ms',
    receipts: N,
    filesystem: process.env.BENCH_HOME_DIR ?? tmpdir(),
    receipt_ms: r,
    health_ms: h,
    sqlite_insert_ms: ins,
    preflight_files_ms: stats(files),
    floor_p50_ms: floorP50,
    floor_p99_ms: floorP99,
    ratio_p50: ratioP50,
    ratio_p99: Math.round((r.p99 / floorP99) * 100) / 100,
    goal_ratio_p50: GOAL_RATIO,
    meets_goal: ratioP50 <= GOAL_RATIO,
  };
}
