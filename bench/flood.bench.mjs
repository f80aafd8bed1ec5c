// Issue 16: receipts under a flood. 1000 concurrent submits (BENCH_FLOOD; BENCH_SHORT 200) over
// the daemon's Unix socket, against the single-client receipt p50 measured in the same run on
// the same home. Goal: flood receipt p99 ≤ 10 × single p50, zero errors other than `busy`
// (admission control, docs/behaviour.md#b2). Every reply counts in the p99 (a `busy` answer is a
// receipt too: the caller learns at once what to do).
//
// The daemon is in-process (dist/) with a runner that does nothing until stopped, so only the
// receipt path is measured; its default admission bounds apply (BENCH_FLOOD_MAX_QUEUED overrides).
//
// Also measured in the same run, as a floor: the same flood against a bare Node HTTP server on
// a Unix socket in this process that answers 202 at once (no parsing, no store). One event loop
// opens 1000 connections, so even that floor sits far above 10 × a single receipt;
// `ratioP99ToFloorP99` says how much of the flood's p99 is the daemon's own work.
import { iterations } from './short.mjs';
import process from 'node:process';
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

/** The flood against a server that answers 202 at once: what 1000 connections cost alone. */
async function floorFlood(home, rawRequest, body) {
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
    const samples = [];
    await Promise.all(
      Array.from({ length: FLOOD }, async () => {
        const s = performance.now();
        await rawRequest({ socketPath }, 'POST', '/v1/tasks/investigate', body).catch(() => undefined);
        samples.push(performance.now() - s);
      }),
    );
    return stats(samples);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

export default async function run() {
  const { startDaemon, buildConfig } = await import('../dist/src/main.js');
  const { silentLogger } = await import('../dist/src/log.js');
  const { FusionClient } = await import('../dist/src/client/index.js');
  const { rawRequest } = await import('../dist/src/client/transport.js');
  const home = mkdtempSync(join(process.env.BENCH_HOME_DIR ?? tmpdir(), 'fusion-bench-flood-'));
  const runner = {
    run: ({ signal }) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('stopped')), { once: true })),
  };
  const maxQueued = process.env.BENCH_FLOOD_MAX_QUEUED === undefined ? {} : { maxQueuedTasks: Number(process.env.BENCH_FLOOD_MAX_QUEUED) };
  const daemon = await startDaemon(buildConfig({ home, socketPath: join(home, 'fusion.sock'), logLevel: 'silent', ...maxQueued }), { runner, log: silentLogger() });
  const client = new FusionClient(daemon.socketPath);
  const body = {
    arguments: { objective: 'Find the admission control', background: ['flood bench'], deliverable: 'file and lines' },
    repo: ROOT,
  };
  try {
    const single = [];
    for (let i = 0; i < SINGLE; i++) {
      const t0 = performance.now();
      const r = await client.raw('POST', '/v1/tasks/investigate', body);
      single.push(performance.now() - t0);
      if (r.status !== 202) throw new Error(`single submit answered ${r.status}: ${JSON.stringify(r.body)}`);
    }
    // Free the waiting places the single-client run used, so the flood meets the configured bound.
    await daemon.close();
    const daemon2 = await startDaemon(buildConfig({ home, socketPath: join(home, 'fusion.sock'), logLevel: 'silent', ...maxQueued }), { runner, log: silentLogger() });
    const client2 = new FusionClient(daemon2.socketPath);
    try {
      const flood = [];
      const codes = {};
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: FLOOD }, async () => {
          const s = performance.now();
          const r = await client2.raw('POST', '/v1/tasks/investigate', body).catch((err) => ({ status: 0, body: { error: { code: `transport:${err.code ?? err.message}` } } }));
          flood.push(performance.now() - s);
          const code = r.status === 202 ? 'accepted' : String(r.body?.error?.code ?? r.status);
          codes[code] = (codes[code] ?? 0) + 1;
        }),
      );
      const wallMs = performance.now() - t0;
      const floorStats = await floorFlood(home, rawRequest, body);
      const singleStats = stats(single);
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
        goal: `flood p99 ≤ ${GOAL_RATIO}× single p50, no error but busy`,
        goalMet: ratio <= GOAL_RATIO && otherErrors.length === 0,
      };
    } finally {
      await daemon2.close();
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}
