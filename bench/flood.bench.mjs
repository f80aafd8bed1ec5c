// Receipts under a flood (admission control, docs/behaviour.md#b2). 1000 concurrent submits (BENCH_FLOOD; BENCH_SHORT 200) over
// the daemon's Unix socket, against the single-client receipt p50 measured in the same run on
// the same home. Every reply counts in the p99 (a `busy` answer is a receipt too: the caller
// learns at once what to do, docs/behaviour.md#b2).
//
// The daemon is in-process (dist/) with a runner that does nothing until stopped, so only the
// receipt path is measured; its default admission bounds apply (BENCH_FLOOD_MAX_QUEUED overrides).
// The clients run in a process of their own (bench/flood-client.mjs), as real callers do.
// BENCH_FLOOD_ROUNDS (default 5, short 3) flood/floor pairs, alternating which goes first; each
// ratio is the median round's.
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
const ROUNDS = iterations('BENCH_FLOOD_ROUNDS', 5, 3);
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
    return await clientRun(socketPath, FLOOD, FLOOD, body);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

/** Starts a daemon on a fresh home under `base` whose runner does nothing until stopped. */
async function floodDaemon(base, maxQueued) {
  const { startDaemon, buildConfig } = await import('../dist/src/main.js');
  const { silentLogger } = await import('../dist/src/log.js');
  const home = mkdtempSync(join(base, 'fusion-bench-flood-'));
  const runner = {
    run: ({ signal }) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('stopped')), { once: true })),
  };
  const daemon = await startDaemon(buildConfig({ home, socketPath: join(home, 'fusion.sock'), logLevel: 'silent', ...maxQueued }), { runner, log: silentLogger() });
  return {
    home,
    daemon,
    async close() {
      await daemon.close();
      rmSync(home, { recursive: true, force: true });
    },
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

export default async function run() {
  const base = process.env.BENCH_HOME_DIR ?? tmpdir();
  const maxQueued = process.env.BENCH_FLOOD_MAX_QUEUED === undefined ? {} : { maxQueuedTasks: Number(process.env.BENCH_FLOOD_MAX_QUEUED) };
  const body = {
    arguments: { objective: 'Find the admission control', background: ['flood bench'], deliverable: 'file and lines' },
    repo: ROOT,
  };
  const first = await floodDaemon(base, maxQueued);
  let single;
  try {
    single = await clientRun(first.daemon.socketPath, SINGLE, 1, body);
    if (single.codes.accepted !== SINGLE) throw new Error(`single submits answered ${JSON.stringify(single.codes)}`);
  } finally {
    await first.close();
  }
  // Rounds of one flood against the daemon (a fresh home each: every place free) and one against
  // the floor, in alternating order: a machine shared with other work slows one flood now and
  // then, and one pair would blame the daemon (or the floor) for it. The ratio is the median
  // round's.
  const rounds = [];
  const codes = {};
  const allFlood = [];
  const allFloor = [];
  for (let i = 0; i < ROUNDS; i += 1) {
    const floodOnce = async () => {
      const d = await floodDaemon(base, maxQueued);
      try {
        const t0 = performance.now();
        const r = await clientRun(d.daemon.socketPath, FLOOD, FLOOD, body);
        return { ...r, wallMs: performance.now() - t0 };
      } finally {
        await d.close();
      }
    };
    const floorOnce = async () => {
      const home = mkdtempSync(join(base, 'fusion-bench-floor-'));
      try {
        return await floorFlood(home, body);
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    };
    let flood;
    let floor;
    if (i % 2 === 0) {
      flood = await floodOnce();
      floor = await floorOnce();
    } else {
      floor = await floorOnce();
      flood = await floodOnce();
    }
    for (const [c, n] of Object.entries(flood.codes)) codes[c] = (codes[c] ?? 0) + n;
    allFlood.push(...flood.samples);
    allFloor.push(...floor.samples);
    const floodP99 = stats(flood.samples).p99;
    const floorP99 = stats(floor.samples).p99;
    rounds.push({ floodP99, floorP99, ratio: Math.round((floodP99 / floorP99) * 100) / 100, wallMs: Math.round(flood.wallMs) });
  }
  const singleStats = stats(single.samples);
  const floodStats = stats(allFlood);
  const floorStats = stats(allFloor);
  const floodP99 = median(rounds.map((r) => r.floodP99));
  const floorP99 = median(rounds.map((r) => r.floorP99));
  const floorRatio = median(rounds.map((r) => r.ratio));
  const otherErrors = Object.entries(codes).filter(([c]) => c !== 'accepted' && c !== 'busy');
  const ratio = Math.round((floodP99 / singleStats.p50) * 100) / 100;
  return {
    flood: FLOOD,
    rounds: ROUNDS,
    single: singleStats,
    floodReceipts: floodStats,
    outcomes: codes,
    ratioP99ToSingleP50: ratio,
    floorFloodReceipts: floorStats,
    perRound: rounds,
    ratioP99ToFloorP99: floorRatio,
    ratioP99ToFloorP99Max: Math.max(...rounds.map((r) => r.ratio)),
    goal: `flood p99 ≤ ${GOAL_RATIO}× single p50, no error but busy (below this machine's floor: see floorP99ToSingleP50)`,
    goalMet: ratio <= GOAL_RATIO && otherErrors.length === 0,
    floorP99ToSingleP50: Math.round((floorP99 / singleStats.p50) * 100) / 100,
    floorGoal: `median round's flood p99 ≤ ${FLOOR_GOAL_RATIO}× the bare-HTTP floor p99 of the same round, no error but busy`,
    floorGoalMet: floorRatio <= FLOOR_GOAL_RATIO && otherErrors.length === 0,
  };
}
