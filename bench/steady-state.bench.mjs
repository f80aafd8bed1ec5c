// Flat memory and bounded disk (docs/operations.md#benchmarks). A real daemon process (builtin engine, bwrap) runs
// builtin tasks over the e2e fixture repository; its RSS is read idle after GC (--expose-gc,
// bench/steady-daemon.mjs) after the first 10 tasks and after N more (BENCH_STEADY_TASKS,
// default 1000, BENCH_SHORT 20). Goal: RSS(after N) ≤ 1.2 × RSS(after 10). Also reported: bytes
// on disk per completed task (task folders + database + WAL, growth over the run / tasks;
// goal ≤ 60 KB).
//
// Method. The tasks run in segments of BENCH_STEADY_SEGMENT (default 100, short 10); each segment
// is submitted at once (2 run slots), waited for, each result read once, then the daemon idles
// 1 s and takes a reading: a full GC of the main isolate, 200 ms, another full GC, then
// process.memoryUsage(), the Anonymous total of /proc/self/smaps_rollup and V8's space sizes
// (`MEM {…}` on its stdout). The readings form a curve (`curve`), so warm-up that plateaus (JIT
// code, V8's old space settling, SQLite's page cache filling to cache_size) can be told from a
// leak, whose slope does not flatten:
// `slopeBytesPerTask` gives bytes per task over the whole run and over the last two segments,
// for RSS, the V8 heap (heapTotal = reserved, heapUsed = live after GC), V8's new space alone,
// external buffers, and native anonymous memory outside the main V8 heap (smaps Anonymous −
// heapTotal: malloc, SQLite, a stage worker thread still running). `projectedRatioAt1000` extrapolates the
// last segments' slope to 1000 tasks (for runs shorter than that; it is not the measured ratio).
// V8's young generation (new space, up to 32 MiB here) is resized by allocation rate and given
// back only now and then, so it may be full-size at one reading and 4 MiB at the next: the ratio
// is also given net of it (RSS − new space size), beside the raw one.
// The evaluator, repair and merger run as Bree jobs, one worker thread per run (none is left at a
// reading: the segment's tasks have all ended). glibc's free lists are not trimmed (malloc_trim
// is not reachable from JS): RSS is what an operator sees, not a floor. The daemon inherits this
// process's environment, so MALLOC_ARENA_MAX set for the bench reaches it.
// Progress lines (`[steady] …`, with the ratio so far) go to stderr.
import { iterations } from './short.mjs';
import process from 'node:process';
import { clearInterval, setInterval, setTimeout } from 'node:timers';
import { spawn, execFileSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const N = iterations('BENCH_STEADY_TASKS', 1000, 20);
const FIRST = 10;
const SEGMENT = iterations('BENCH_STEADY_SEGMENT', 100, 10);

/** RSS without V8's young generation (reserved by allocation rate, empty after a GC). */
function netOfYoung(m) {
  return m.rss - (m.spaces?.new_space?.size ?? m.newSpace ?? 0);
}

/** The figures of one MEM reading kept in the curve (bytes). */
function pick(m) {
  const anon = (m.anonKb ?? 0) * 1024;
  return { rss: m.rss, rssNetOfYoung: netOfYoung(m), heapTotal: m.heapTotal, heapUsed: m.heapUsed, newSpace: m.spaces?.new_space?.size ?? 0, external: m.external, nativeAnon: anon > 0 ? anon - m.heapTotal : 0 };
}

export async function prerequisites() {
  return existsSync('/usr/bin/bwrap') ? [] : ['/usr/bin/bwrap is missing (apt-get install bubblewrap)'];
}

function duBytes(dir) {
  return Number(execFileSync('du', ['-sb', dir]).toString().split('\t')[0]);
}

export default async function run() {
  const { FusionClient } = await import('../dist/src/client/index.js');
  const home = mkdtempSync(join(tmpdir(), 'fusion-bench-steady-'));
  const repoRoot = mkdtempSync(join(tmpdir(), 'fusion-bench-steady-repo-'));
  const repo = join(repoRoot, 'repo');
  cpSync(join(ROOT, 'test', 'fixtures', 'e2e', 'repo'), repo, { recursive: true });
  // The sandbox uid must read it (mkdtemp is 0700).
  const open = (p) => {
    chmodSync(p, statSync(p).isDirectory() ? 0o755 : 0o644);
    if (statSync(p).isDirectory()) for (const n of readdirSync(p)) open(join(p, n));
  };
  chmodSync(repoRoot, 0o755);
  open(repo);
  const proc = spawn(process.execPath, ['--expose-gc', join(ROOT, 'bench', 'steady-daemon.mjs'), home], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  proc.stdout.on('data', (c) => (out += c.toString()));
  const waitLine = (re, from) =>
    new Promise((resolve, reject) => {
      const t = setInterval(() => {
        const m = re.exec(out.slice(from));
        if (m) {
          clearInterval(t);
          resolve(m);
        }
        if (proc.exitCode !== null) {
          clearInterval(t);
          reject(new Error(`steady daemon exited: ${out}`));
        }
      }, 50);
    });
  try {
    const socket = (await waitLine(/READY (\S+)/, 0))[1];
    const client = new FusionClient(socket);
    const args = { objective: 'Find where the token bucket refills tokens', background: ['bursts after a pause'], deliverable: 'file and lines' };
    const runTasks = async (count) => {
      const ids = [];
      for (let i = 0; i < count; i++) ids.push((await client.call('POST', '/v1/tasks/investigate', { arguments: args, repo })).taskId);
      const states = {};
      for (const id of ids) {
        let w;
        do w = await client.call('GET', `/v1/tasks/${id}/wait?timeoutMs=600000`);
        while (!w.terminal);
        const key = w.task.state === 'failed' ? `failed:${w.task.error?.code}:${String(w.task.error?.message).slice(0, 160)}` : w.task.state;
        states[key] = (states[key] ?? 0) + 1;
        // Read each result once, as a client would (usage delivery bookkeeping included).
        await client.call('GET', `/v1/tasks/${id}/result`).catch(() => undefined);
      }
      return states;
    };
    const reading = async () => {
      const from = out.length;
      proc.kill('SIGUSR2');
      const mem = JSON.parse((await waitLine(/MEM (\{.*\})\n/, from))[1]);
      await waitLine(/RSS (\d+)/, from);
      return mem;
    };
    const mb = (b) => +(b / 1e6).toFixed(1);
    const idle = await reading();
    const first = await runTasks(FIRST);
    await new Promise((r) => setTimeout(r, 1000));
    const atFirst = await reading();
    const diskFirst = duBytes(home);
    // Readings every SEGMENT tasks give the curve: warm-up that plateaus has a flattening slope,
    // a leak keeps it. The last segment's slope is the figure to extrapolate from.
    const curve = [{ tasks: FIRST, ...pick(atFirst) }];
    process.stderr.write(`[steady] idle ${JSON.stringify(pick(idle))}, after ${FIRST} tasks ${JSON.stringify(curve[0])}\n`);
    const rest = {};
    for (let done = 0; done < N; ) {
      const n = Math.min(SEGMENT, N - done);
      for (const [k, v] of Object.entries(await runTasks(n))) rest[k] = (rest[k] ?? 0) + v;
      done += n;
      await new Promise((r) => setTimeout(r, 1000));
      const m = await reading();
      curve.push({ tasks: FIRST + done, ...pick(m) });
      // Progress with the ratio so far, so a run stopped early still says where it stood.
      const ratioSoFar = `${(m.rss / atFirst.rss).toFixed(3)} (net of young generation ${(netOfYoung(m) / netOfYoung(atFirst)).toFixed(3)})`;
      process.stderr.write(`[steady] ${FIRST + done} tasks, ratio ${ratioSoFar}: ${JSON.stringify(curve.at(-1))} ${new Date().toISOString()}\n`);
    }
    const atAll = await reading();
    const diskAfter = duBytes(home);
    const ratio = Math.round((atAll.rss / atFirst.rss) * 1000) / 1000;
    const ratioNet = Math.round((netOfYoung(atAll) / netOfYoung(atFirst)) * 1000) / 1000;
    const perTask = Math.round((diskAfter - diskFirst) / N);
    const slope = (a, b, key) => Math.round((b[key] - a[key]) / (b.tasks - a.tasks));
    const lastFrom = curve.length > 2 ? curve.at(-3) : curve[0];
    const last = curve.at(-1);
    return {
      tasks: { first: FIRST, more: N, segment: SEGMENT },
      // glibc's arena cap as the daemon saw it (null: glibc's default, 8 per core).
      mallocArenaMax: process.env.MALLOC_ARENA_MAX ?? null,
      outcomes: { first, rest },
      rssMb: { idleAtStart: mb(idle.rss), afterFirst: mb(atFirst.rss), afterAll: mb(atAll.rss) },
      rssRatio: ratio,
      // V8 sizes its young generation by allocation rate and gives it back only now and then:
      // between two readings it moved 32 → 4 MiB (RSS −23 MB) with nothing else changed, a swing
      // as large as the goal's margin. The same ratio without it (RSS − new space) is given beside.
      rssMbNetOfYoungGeneration: { afterFirst: mb(netOfYoung(atFirst)), afterAll: mb(netOfYoung(atAll)) },
      rssRatioNetOfYoungGeneration: ratioNet,
      rssGoal: 'afterAll ≤ 1.2 × afterFirst',
      rssGoalMet: ratio <= 1.2,
      // Bytes per task over the whole run and over the last two segments, for RSS, the V8 heap
      // (reserved = heapTotal, used = heapUsed), external buffers, and native anonymous memory
      // outside the V8 heap (smaps Anonymous − heapTotal).
      slopeBytesPerTask: Object.fromEntries(
        ['rss', 'rssNetOfYoung', 'heapTotal', 'heapUsed', 'newSpace', 'external', 'nativeAnon'].map((k) => [k, { overall: slope(curve[0], last, k), lastSegments: slope(lastFrom, last, k) }]),
      ),
      lastSegmentsFromTask: lastFrom.tasks,
      projectedRatioAt1000: +((last.rss + (1000 + FIRST - last.tasks) * slope(lastFrom, last, 'rss')) / atFirst.rss).toFixed(3),
      projectedRatioNetOfYoungGenerationAt1000: +((last.rssNetOfYoung + (1000 + FIRST - last.tasks) * slope(lastFrom, last, 'rssNetOfYoung')) / atFirst.rssNetOfYoung).toFixed(3),
      curve,
      diskBytesPerTask: perTask,
      diskGoal: '≤ 60 KB per completed builtin task',
      diskGoalMet: perTask <= 60_000,
    };
  } finally {
    proc.kill('SIGTERM');
    await new Promise((r) => proc.once('exit', r));
    rmSync(home, { recursive: true, force: true });
    rmSync(repoRoot, { recursive: true, force: true });
  }
}
