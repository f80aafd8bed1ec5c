// CLI start-up cost: how long `fusion help`, `fusion --version` and `fusion tasks` take as whole
// processes, against a bare `node -e 0` measured in the same run (interleaved, rotating order, so
// machine noise lands on all of them alike). The CLI loads only what a command needs, so the
// commands that never start a daemon should cost a small multiple of bare node.
//
//   help      fusion help                  (no daemon, no I/O beyond stdout)
//   version   fusion --version
//   tasks     fusion tasks --json          against a data directory with no daemon: the client
//                                          path up to the connection refusal (exit 3)
//   node      node -e 0                    the floor
//
// Ratios are p50(command) / p50(node). Goal: help and version ≤ GOAL_RATIO.
// Env: BENCH_CLI_RUNS (default 20, short 5), BENCH_CLI (path of the CLI, default dist/src/cli/main.js:
// point it at an older build to compare).
import { iterations } from './short.mjs';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { stats } from './floor.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = process.env.BENCH_CLI ?? join(ROOT, 'dist', 'src', 'cli', 'main.js');
const RUNS = iterations('BENCH_CLI_RUNS', 20, 5);
const GOAL_RATIO = 2;

function timed(args, env, expectCodes) {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, args, { env, encoding: 'utf8' });
  const ms = performance.now() - t0;
  if (!expectCodes.includes(r.status)) throw new Error(`node ${args.join(' ')} exited ${r.status} (expected ${expectCodes.join('|')}): ${r.stderr.slice(0, 400)}`);
  return ms;
}

export default async function run() {
  const home = mkdtempSync(join(tmpdir(), 'fusion-bench-cli-'));
  const env = { ...process.env, FUSION_HOME: home, FUSION_SOCKET: join(home, 'fusion.sock') };
  const ops = {
    node: () => timed(['-e', '0'], env, [0]),
    help: () => timed([CLI, 'help'], env, [0]),
    version: () => timed([CLI, '--version'], env, [0, 2]),
    tasks: () => timed([CLI, 'tasks', '--json'], env, [3]),
  };
  const names = Object.keys(ops);
  const samples = Object.fromEntries(names.map((n) => [n, []]));
  try {
    // One warm-up round (file cache), then RUNS measured rounds in rotating order.
    for (const n of names) ops[n]();
    for (let i = 0; i < RUNS; i++) {
      for (let k = 0; k < names.length; k++) {
        const n = names[(i + k) % names.length];
        samples[n].push(ops[n]());
      }
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
  const s = Object.fromEntries(names.map((n) => [n, stats(samples[n])]));
  const ratio = (n) => Math.round((s[n].p50 / s.node.p50) * 100) / 100;
  const ratios = { help: ratio('help'), version: ratio('version'), tasks: ratio('tasks') };
  return {
    cli: CLI,
    runs: RUNS,
    ms: s,
    ratioToBareNode: ratios,
    goal: { ratio: GOAL_RATIO, met: ratios.help <= GOAL_RATIO && ratios.version <= GOAL_RATIO },
  };
}
