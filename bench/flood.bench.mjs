// Receipts under a flood (admission control, docs/behaviour.md#b2). 1000 concurrent submits (BENCH_FLOOD; BENCH_SHORT 200) over
// the daemon's Unix socket, against the single-client receipt p50 measured in the same run on
// the same home. Every reply counts in the p99 (a `busy` answer is a receipt too: the caller
// learns at once what to do, docs/behaviour.md#b2).
//
// The daemon is in-process (dist/) with a runner that does nothing until stopped, so only the
// receipt path is measured; its default admission bounds apply (BENCH_FLOOD_MAX_QUEUED overrides).
// The clients run in a process of their own (bench/flood-client.mjs), as real callers do.
//
// Two goals are reported. The issue's, `goalMet`: flood p99 ≤ 10 × single p50, no error but
// `busy`. It cannot be met by any server on this machine, and the run proves it: the same flood
// against a bare Node HTTP server on a Unix socket that answers 202 at once (no parsing, no
// store, no fsync) is the floor, and its p99 alone is far above 10 × a single receipt (1000
// connections take ~1000 × the per-request CPU of accept + HTTP parse + reply, serialised on
// one event loop; 10 × a single p50 leaves ~0.05 ms per request). So the goal this bench holds
// the daemon to is `floorGoalMet`: flood p99 ≤ 3 × the floor's p99 in the same run (the
// daemon's own work, validation, admission, a group-committed durable insert, costs at most
// twice what bare HTTP does), with no error but `busy`. docs/operations.md#benchmarks says more.
import { iterations } from './short.mjs';
import process from 'node:process';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { stats } from './floor.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const FLOOD = iterations('BENCH_FLOOD', 1000, 200);
const SINGLE = iterations('BENCH_FLOOD_SINGLE', 50, 20);
const GOAL_RATIO = 10;
const FLOOR_GOAL_RATIO = 3;

/** Runs bench/flood-client.mjs: `count` requests, `concurrent` at a time; its samples and reply codes. */
function clientRun(socketPath, count, concurrent, body) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(ROOT, 'bench', 'flood-client.mjs'), socketPath, String(count), String(concurrent), JSON.stringify(body)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c) => (out += c.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`flood client exited ${code}: ${out}`))));
  });
}

/** The flood against a server that answers 202 at once: what the connections cost alone. */
async function floorFlood(home, body) {
  const socketPath = join(home, 'floor.sock');
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(202, { 'content-type': 'application/json' });
      res.end('{"taskId":"floor"}');
    });
  });
  await new Promise((resolve) => server.listen({ path: socketPath, backlog: 4096 }, resolve));
  try {
    return stats((await clientRun(socketPath, FLOOD, FLOOD, body)).samples);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

export default async function run() {
  const { startDaemon, buildConfig } = await import('../dist/src/main.js');
  const { silentLogger } = await import('../dist/src/log.js');
  const home = mkdtempSync(join(process.env.BENCH_HOME_DIR ?? tmpdir(), 'fusion-bench-flood-'));
  const runner = {
    run: ({ signal }) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('stopped')), { once: true })),
  };
  const maxQueued = process.env.BENCH_FLOOD_MAX_QUEUED === undefined ? {} : { maxQueuedTasks: Number(process.env.BENCH_FLOOD_MAX_QUEUED) };
  const daemon = await startDaemon(buildConfig({ home, socketPath: join(home, 'fusion.sock'), logLevel: 'silent', ...maxQueued }), { runner, log: silentLogger() });
  const body = {
    arguments: { objective: 'Find the admission control', background: ['flood bench'], deliverable: 'file and lines' },
    repo: ROOT,
  };
  try {
    const single = await clientRun(daemon.socketPath, SINGLE, 1, body);
    if (single.codes.accepted !== SINGLE) throw new Error(`single submits answered ${JSON.stringify(single.codes)}`);
    // Free the waiting places the single-client run used, so the flood meets the configured bound.
    await daemon.close();
    const daemon2 = await startDaemon(buildConfig({ home, socketPath: join(home, 'fusion.sock'), logLevel: 'silent', ...maxQueued }), { runner, log: silentLogger() });
    try {
      const t0 = performance.now();
      const { samples: flood, codes } = await clientRun(daemon2.socketPath, FLOOD, FLOOD, body);
      const wallMs = performance.now() - t0;
      const floorStats = await floorFlood(home, body);
      const singleStats = stats(single.samples);
      const floodStats = stats(flood);
      const otherErrors = Object.entries(codes).filter(([c]) => c !== 'accepted' && c !== 'busy');
      const ratio = Math.round((floodStats.p99 / singleStats.p50) * 100) / 100;
      return {
        flood: FLOOD,
        single: singleStats,
        floodReceipts: floodStats,
        wallMs: Math.round(wallMs),
        outcomes: codes,
        ratioP99ToSingleP50: ratio,
        floorFloodReceipts: floorStats,
        ratioP99ToFloorP99: Math.round((floodStats.p99 / floorStats.p99) * 100) / 100,
        goal: `flood p99 ≤ ${GOAL_RATIO}× single p50, no error but busy (below this machine's floor: see floorP99ToSingleP50)`,
        goalMet: ratio <= GOAL_RATIO && otherErrors.length === 0,
        floorP99ToSingleP50: Math.round((floorStats.p99 / singleStats.p50) * 100) / 100,
        floorGoal: `flood p99 ≤ ${FLOOR_GOAL_RATIO}× the bare-HTTP floor p99, no error but busy`,
        floorGoalMet: floodStats.p99 / floorStats.p99 <= FLOOR_GOAL_RATIO && otherErrors.length === 0,
      };
    } finally {
      await daemon2.close();
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}
