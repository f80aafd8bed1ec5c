// Issue 16: flat memory and bounded disk. A real daemon process (builtin engine, bwrap) runs
// builtin tasks over the e2e fixture repository; its RSS is read idle after GC (--expose-gc,
// bench/steady-daemon.mjs) after the first 10 tasks and after N more (BENCH_STEADY_TASKS,
// default 1000, BENCH_SHORT 20). Goal: RSS(after N) ≤ 1.2 × RSS(after 10). Also reported: bytes
// on disk per completed task (task folders + database + WAL, growth over the run / tasks;
// goal ≤ 60 KB).
// The daemon also prints a `MEM {…}` line on stderr at each reading (process.memoryUsage() and
// the Anonymous total of /proc/self/smaps_rollup) to tell V8 heap growth from native growth.
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
    const rss = async () => {
      const from = out.length;
      proc.kill('SIGUSR2');
      return Number((await waitLine(/RSS (\d+)/, from))[1]);
    };
    const idleRss = await rss();
    const first = await runTasks(FIRST);
    await new Promise((r) => setTimeout(r, 1000));
    const rssFirst = await rss();
    const diskFirst = duBytes(home);
    const rest = await runTasks(N);
    await new Promise((r) => setTimeout(r, 1000));
    const rssAfter = await rss();
    const diskAfter = duBytes(home);
    const ratio = Math.round((rssAfter / rssFirst) * 1000) / 1000;
    const perTask = Math.round((diskAfter - diskFirst) / N);
    return {
      tasks: { first: FIRST, more: N },
      outcomes: { first, rest },
      rssMb: { idleAtStart: +(idleRss / 1e6).toFixed(1), afterFirst: +(rssFirst / 1e6).toFixed(1), afterAll: +(rssAfter / 1e6).toFixed(1) },
      rssRatio: ratio,
      rssGoal: 'afterAll ≤ 1.2 × afterFirst',
      rssGoalMet: ratio <= 1.2,
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
