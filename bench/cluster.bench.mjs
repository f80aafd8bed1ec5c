// Cluster mode (docs/operations.md#cluster-mode) (PostgreSQL store + BullMQ task queue), on throwaway PostgreSQL and
// Redis servers started by this bench (scripts/throwaway-servers.mjs).
//
// 1. Receipt latency in cluster mode over the daemon's Unix socket, against a floor measured in
//    the same run: floor = one bare PostgreSQL INSERT of a task-sized row (its own table, same
//    server) + one BullMQ add (its own queue, same Redis) + one GET /v1/health round trip on the
//    same socket (HTTP + JSON). Goal: receipt_p50 / floor_p50 ≤ 3. The daemon is in-process
//    (dist/) with a runner that does nothing until stopped, so only the receipt path is measured;
//    the four measurements are interleaved (rotating order).
// 2. Draining N builtin tasks (real bwrap sandboxes, builtin engine) with 1 daemon, then with 2
//    daemons sharing the database and queue (2 task slots each, test/fixtures/e2e/cluster-daemon.mjs),
//    then with 1 daemon of 4 slots (as many slots as the two together).
//    On a 2-core machine the second daemon adds overhead rather than throughput: the ratio is
//    recorded (speedup = 1-daemon wall / 2-daemon wall, and its inverse), with the core count and
//    the machine's load average, and docs/operations.md#capacity-model extrapolates to hosts of
//    their own.
//
// Env: BENCH_CLUSTER_RECEIPTS (default 200, short 30), BENCH_CLUSTER_TASKS (default 20, short 6).
import process from 'node:process';
import { spawn } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { interleaved, stats } from './floor.mjs';
import { iterations } from './short.mjs';
import { pgBinDir, REDIS_SERVER, startPostgres, startRedis } from '../scripts/throwaway-servers.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const N = iterations('BENCH_CLUSTER_RECEIPTS', 200, 30);
const TASKS = iterations('BENCH_CLUSTER_TASKS', 20, 6);
const WARMUP = 15;
/** Task slots per daemon (--concurrency). */
const SLOTS = 2;
const GOAL_RATIO = 3;
const BWRAP = '/usr/bin/bwrap';
const ARGS = {
  objective: 'Find where the token bucket refills tokens and how the refill rate is applied',
  background: ['Clients report that /login allows bursts after a pause'],
  deliverable: 'The file and lines that implement the refill',
};

export async function prerequisites() {
  const missing = [];
  if (pgBinDir() === undefined) missing.push('no PostgreSQL server under /usr/lib/postgresql (apt-get install postgresql)');
  if (!existsSync(REDIS_SERVER)) missing.push(`${REDIS_SERVER} is missing (apt-get install redis-server)`);
  if (!existsSync(BWRAP)) missing.push(`${BWRAP} is missing (apt-get install bubblewrap)`);
  return missing;
}

async function receiptLatency(pg, redis, repo) {
  const { startDaemon, buildConfig } = await import('../dist/src/main.js');
  const { silentLogger } = await import('../dist/src/log.js');
  const { FusionClient } = await import('../dist/src/client/index.js');
  const { Queue } = await import('bullmq');
  const pgLib = (await import('pg')).default;

  const databaseUrl = await pg.createDatabase();
  const home = mkdtempSync(join(tmpdir(), 'fusion-bench-cluster-'));
  const runner = {
    run: ({ signal }) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('stopped')), { once: true })),
  };
  const daemon = await startDaemon(buildConfig({ home, socketPath: join(home, 'fusion.sock'), logLevel: 'silent', databaseUrl, redisUrl: redis.url, daemonId: 'bench' }), { runner, log: silentLogger() });
  const client = new FusionClient(daemon.socketPath);
  const floorDb = new pgLib.Client({ connectionString: databaseUrl });
  await floorDb.connect();
  await floorDb.query('CREATE TABLE floor_rows (id TEXT PRIMARY KEY, payload TEXT NOT NULL, created_at TEXT NOT NULL)');
  const floorQueue = new Queue('bench-floor', { connection: { url: redis.url, maxRetriesPerRequest: null } });
  const payload = JSON.stringify({ args: ARGS, cwd: ROOT, plan: 'x'.repeat(300) });
  const receipt = [];
  const health = [];
  const insert = [];
  const add = [];
  let seq = 0;
  const timed = async (list, record, fn) => {
    const t0 = performance.now();
    await fn();
    if (record) list.push(performance.now() - t0);
  };
  try {
    await interleaved({
      receipt: (record) => timed(receipt, record, async () => {
        const reply = await client.raw('POST', '/v1/tasks/investigate', { arguments: ARGS, repo });
        if (reply.status !== 202) throw new Error(`submit answered ${reply.status}: ${JSON.stringify(reply.body)}`);
      }),
      health: (record) => timed(health, record, async () => {
        const reply = await client.raw('GET', '/v1/health');
        if (reply.status !== 200) throw new Error(`health answered ${reply.status}`);
      }),
      insert: (record) => timed(insert, record, () => floorDb.query('INSERT INTO floor_rows (id, payload, created_at) VALUES ($1, $2, $3)', [`row-${++seq}`, payload, new Date().toISOString()])),
      add: (record) => timed(add, record, () => floorQueue.add('floor', { taskId: `t-${++seq}` }, { jobId: `t-${seq}` })),
    }, WARMUP, N);
  } finally {
    await floorQueue.close();
    await floorDb.end();
    await daemon.close();
    rmSync(home, { recursive: true, force: true });
  }
  const r = stats(receipt);
  const h = stats(health);
  const ins = stats(insert);
  const a = stats(add);
  const floorP50 = Math.round((h.p50 + ins.p50 + a.p50) * 1000) / 1000;
  const ratio = Math.round((r.p50 / floorP50) * 100) / 100;
  return {
    receipts: N, receipt_ms: r, health_ms: h, pg_insert_ms: ins, redis_add_ms: a,
    floor_p50_ms: floorP50, ratio_p50: ratio, goal_ratio_p50: GOAL_RATIO, meets_goal: ratio <= GOAL_RATIO,
  };
}

/** Starts `count` cluster daemons of `slots` task slots each on a fresh database, submits TASKS, waits for all; wall seconds. */
async function drain(pg, redis, count, repo, slots = SLOTS) {
  const { FusionClient } = await import('../dist/src/client/index.js');
  const databaseUrl = await pg.createDatabase();
  const procs = [];
  try {
    const clients = await Promise.all(Array.from({ length: count }, (_, i) => new Promise((resolve, reject) => {
      const home = mkdtempSync(join(tmpdir(), 'fusion-bench-drain-'));
      const runRoot = join(tmpdir(), `fsn-bench-${process.pid}-${count}-${i}`);
      const proc = spawn(process.execPath, [join(ROOT, 'test', 'fixtures', 'e2e', 'cluster-daemon.mjs'), home, runRoot, `d${i}`, databaseUrl, redis.url, '0'], {
        stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FUSION_TASK_CONCURRENCY: String(slots) },
      });
      procs.push({ proc, home, runRoot });
      let out = '';
      proc.stdout.on('data', (c) => {
        out += c.toString();
        const m = /^READY (\S+)$/m.exec(out);
        if (m) resolve(new FusionClient(m[1]));
      });
      proc.stderr.resume();
      proc.once('exit', (code) => reject(new Error(`bench daemon exited (${code})`)));
    })));
    const t0 = performance.now();
    const ids = [];
    for (let i = 0; i < TASKS; i++) ids.push((await clients[0].call('POST', '/v1/tasks/investigate', { arguments: ARGS, repo })).taskId);
    for (const id of ids) {
      const waited = await clients[clients.length - 1].call('GET', `/v1/tasks/${id}/wait?timeoutMs=600000`);
      if (waited.task.state !== 'completed') throw new Error(`task ${id} ended ${waited.task.state}`);
    }
    return (performance.now() - t0) / 1000;
  } finally {
    for (const { proc, home, runRoot } of procs) {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGTERM');
        await new Promise((r) => proc.once('exit', r));
      }
      rmSync(home, { recursive: true, force: true });
      rmSync(runRoot, { recursive: true, force: true });
    }
  }
}

export default async function run() {
  const pg = await startPostgres();
  const redis = await startRedis();
  const repoRoot = mkdtempSync(join(tmpdir(), 'fusion-bench-repo-'));
  try {
    // The sandbox user must read the repository: a world-readable copy of the fixture. In cluster
    // mode a receipt packs the repository into its bundle, so the receipt figure is for this
    // small repository; packing grows with the tree (docs/operations.md#capacity-model).
    const repo = join(repoRoot, 'repo');
    cpSync(join(ROOT, 'test', 'fixtures', 'e2e', 'repo'), repo, { recursive: true });
    chmodSync(repoRoot, 0o755);
    const receipt = await receiptLatency(pg, redis, repo);
    // The machine is shared (other work may run beside the bench): its load is recorded with the figures.
    const loadBefore = loadavg()[0];
    const one = await drain(pg, redis, 1, repo);
    const two = await drain(pg, redis, 2, repo);
    // Two daemons hold twice the slots: one daemon with as many slots in all tells the cluster's
    // own cost (a second process, queue hand-offs) from the gain of running more tasks at once.
    const oneSameSlots = await drain(pg, redis, 1, repo, 2 * SLOTS);
    const loadAfter = loadavg()[0];
    return {
      unit: 'ms',
      receipt,
      drain: {
        tasks: TASKS,
        slotsPerDaemon: SLOTS,
        one_daemon_s: Math.round(one * 10) / 10,
        two_daemons_s: Math.round(two * 10) / 10,
        one_daemon_same_slots_s: Math.round(oneSameSlots * 10) / 10,
        tasks_per_hour_one: Math.round((TASKS / one) * 3600),
        tasks_per_hour_two: Math.round((TASKS / two) * 3600),
        tasks_per_hour_one_same_slots: Math.round((TASKS / oneSameSlots) * 3600),
        speedup_two_vs_one: Math.round((one / two) * 100) / 100,
        wall_ratio_two_vs_one: Math.round((two / one) * 100) / 100,
        // > 1: two daemons are slower than one daemon with the same slots in all (the cluster's overhead).
        wall_ratio_two_vs_one_same_slots: Math.round((two / oneSameSlots) * 100) / 100,
        cpus: cpus().length,
        load_avg_1m: { before: Math.round(loadBefore * 100) / 100, after: Math.round(loadAfter * 100) / 100 },
        note: 'both daemons share this machine\'s cores (and, on a shared machine, its other load): compare two daemons with one daemon of the same slots for the cluster\'s own cost (docs/operations.md#capacity-model)',
      },
      meets_goal: receipt.meets_goal,
    };
  } finally {
    rmSync(repoRoot, { recursive: true, force: true });
    await redis.stop();
    await pg.stop();
  }
}
