// What replay verification costs: the same builtin `investigate` over this repository through
// two in-process daemons (dist/), one replaying every repository tool call before evaluation
// (the default) and one with replay off, runs interleaved so both see the same machine load.
//
//   with_replay_ms / without_replay_ms   submit → completed wall time
//   replay_overhead_ratio                (p50 with − p50 without) / p50 without; goal ≤ 0.10
//   replayed_calls                       tool calls replayed in the last run
//   offline_verify_ms                    `fusion audit verify` of one exported tarball with --replay
//   with_model_latency.*                 the same pair with every model call taking MODEL_LATENCY_MS
//                                        (the builtin engine answers instantly, so a builtin run is
//                                        all tool execution, which replay re-executes; a remote
//                                        model spends most of a run thinking)
//
// Env: BENCH_REPLAY_RUNS (default 5), BENCH_MODEL_LATENCY_MS (default 1000); BENCH_SHORT=1 runs 2.
import process from 'node:process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
const RUNS = process.env.BENCH_SHORT === '1' ? 2 : Number(process.env.BENCH_REPLAY_RUNS ?? 5);
const MODEL_LATENCY_MS = Number(process.env.BENCH_MODEL_LATENCY_MS ?? 1000);

function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
  const round = (x) => Math.round(x * 10) / 10;
  return { n: s.length, p50: round(q(50)), p90: round(q(90)), mean: round(s.reduce((a, b) => a + b, 0) / s.length), min: round(s[0]), max: round(s[s.length - 1]) };
}

export async function prerequisites() {
  const missing = [];
  if (!existsSync('/usr/bin/bwrap')) missing.push('/usr/bin/bwrap is missing (apt-get install bubblewrap)');
  if (!existsSync(join(DIST, 'sandbox', 'replay-main.js'))) missing.push('dist/ is not built (make build)');
  return missing;
}

const ARGS = {
  objective: 'Find where the task state machine and its transition table are implemented',
  background: ['The daemon moves each Fusion task through the states of its lifecycle'],
  deliverable: 'The file and lines that define the states and allowed transitions',
};

/** The builtin roster, every model call delayed by `ms` (a stand-in for a remote model's latency). */
async function slowRoster(ms) {
  const { createBuiltinProvider } = await import('../dist/src/models/builtin/index.js');
  const { fixedRoster } = await import('../dist/src/models/roster.js');
  const slow = (strategy) => {
    const inner = createBuiltinProvider(strategy);
    return { id: inner.id, engine: inner.engine, complete: async (req) => { await sleep(ms); return inner.complete(req); } };
  };
  return fixedRoster([slow('content-search'), slow('path-search'), slow('definition-search')], slow('content-search'), slow('content-search'));
}

async function daemonWith(replay, log, roster) {
  const { startDaemon, buildConfig } = await import('../dist/src/main.js');
  const { FusionClient } = await import('../dist/src/client/index.js');
  const home = mkdtempSync(join(tmpdir(), 'fusion-bench-replay-'));
  const runRoot = join(tmpdir(), `fsn-bench-${randomBytes(4).toString('hex')}`);
  const daemon = await startDaemon(buildConfig({ home, socketPath: join(home, 'fusion.sock'), logLevel: 'silent', sandbox: 'bwrap' }), { log, workflow: { runRoot, replay }, ...(roster ? { roster } : {}) });
  const client = new FusionClient(daemon.socketPath);
  return {
    home,
    daemon,
    async run() {
      const t0 = performance.now();
      const receipt = await client.call('POST', '/v1/tasks/investigate', { arguments: ARGS, repo: ROOT });
      const waited = await client.call('GET', `/v1/tasks/${receipt.taskId}/wait?timeoutMs=600000`);
      if (waited.task.state !== 'completed') throw new Error(`run ended ${waited.task.state}: ${JSON.stringify(waited.task.error)}`);
      return { ms: performance.now() - t0, taskId: receipt.taskId };
    },
    async close() {
      await daemon.close();
      rmSync(home, { recursive: true, force: true });
      rmSync(runRoot, { recursive: true, force: true });
    },
  };
}

/** Interleaved pairs of runs; returns both distributions and the task id of the last replayed run. */
async function pairs(on, off, runs) {
  const withReplay = [];
  const without = [];
  let lastTask;
  await on.run();
  await off.run();
  for (let i = 0; i < runs; i += 1) {
    const order = i % 2 === 0 ? [on, off] : [off, on];
    for (const d of order) {
      const r = await d.run();
      if (d === on) {
        withReplay.push(r.ms);
        lastTask = r.taskId;
      } else {
        without.push(r.ms);
      }
    }
  }
  const a = stats(withReplay);
  const b = stats(without);
  return { with_replay_ms: a, without_replay_ms: b, replay_overhead_ratio: Math.round(((a.p50 - b.p50) / b.p50) * 1000) / 1000, lastTask };
}

export default async function run() {
  const { silentLogger } = await import('../dist/src/log.js');
  const { readMembers } = await import('../dist/src/audit/tar-members.js');
  const { verifyTaskTarball } = await import('../dist/src/audit/offline-verify.js');
  const log = silentLogger();
  const on = await daemonWith(true, log);
  const off = await daemonWith(false, log);
  const withReplay = [];
  const without = [];
  let lastTask;
  try {
    // One warm-up run each (page cache, launcher detection), not recorded.
    await on.run();
    await off.run();
    for (let i = 0; i < RUNS; i += 1) {
      // Alternate which goes first, so neither always runs on a warmer machine.
      if (i % 2 === 0) {
        const a = await on.run();
        withReplay.push(a.ms);
        lastTask = a.taskId;
        without.push((await off.run()).ms);
      } else {
        without.push((await off.run()).ms);
        const a = await on.run();
        withReplay.push(a.ms);
        lastTask = a.taskId;
      }
    }
    const sealed = await on.daemon.store.getTaskTarball(lastTask);
    const records = readMembers(sealed.data).filter((m) => m.name.endsWith('.replay.json'));
    const replayedCalls = records.reduce((n, m) => n + JSON.parse(m.data.toString('utf8')).calls.length, 0);
    const t0 = performance.now();
    const report = await verifyTaskTarball(sealed.data, { replayRepo: ROOT });
    const offlineVerifyMs = performance.now() - t0;
    if (!report.ok) throw new Error(`offline verify failed: ${JSON.stringify(report.failure)}`);
    const a = stats(withReplay);
    const b = stats(without);
    const latency = await (async () => {
      const roster = await slowRoster(MODEL_LATENCY_MS);
      const slowOn = await daemonWith(true, log, roster);
      const slowOff = await daemonWith(false, log, roster);
      try {
        const r = await pairs(slowOn, slowOff, RUNS);
        return { model_latency_ms: MODEL_LATENCY_MS, with_replay_ms: r.with_replay_ms, without_replay_ms: r.without_replay_ms, replay_overhead_ratio: r.replay_overhead_ratio };
      } finally {
        await slowOn.close();
        await slowOff.close();
      }
    })();
    return {
      unit: 'ms',
      runs: RUNS,
      with_replay_ms: a,
      without_replay_ms: b,
      replay_overhead_ratio: Math.round(((a.p50 - b.p50) / b.p50) * 1000) / 1000,
      goal_ratio: 0.1,
      replayed_calls: replayedCalls,
      tarball_bytes: sealed.bytes,
      offline_verify_ms: Math.round(offlineVerifyMs),
      with_model_latency: latency,
    };
  } finally {
    await on.close();
    await off.close();
  }
}
