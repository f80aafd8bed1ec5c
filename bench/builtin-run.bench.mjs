// Issue 3: what a sandboxed candidate costs to start, and what a whole builtin run costs.
//
//   host_node_ms          `node -e 0` on the host, no sandbox (reference)
//   bare_bwrap_ms         `bwrap --unshare-all --die-with-parent <runtime binds> node -e 0`, spawn → exit
//   launcher_node_ms      the production launcher (seccomp, uid drop, limits, binds) running
//                         `node -e 0`: launch() call → exit
//   child_first_request_ms  the production launcher running the real candidate child
//                         (sandbox/child-main.js, its request, sealed log, broker socket):
//                         launch() call → the broker's first model request
//   start_overhead_ms     child_first_request p50 − bare_bwrap p50 (what the product adds)
//   full_run_ms           a full builtin `investigate` over this repository through an
//                         in-process daemon (dist/): submit → completed, with per-stage times
//
// Env: BENCH_START_RUNS (default 15), BENCH_FULL_RUNS (default 3).
import { iterations as iterationCount } from './short.mjs';
import process from 'node:process';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, realpathSync, lstatSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
const BWRAP = '/usr/bin/bwrap';
const START_RUNS = iterationCount('BENCH_START_RUNS', 15, 3);
const FULL_RUNS = iterationCount('BENCH_FULL_RUNS', 3, 1);
const IS_ROOT = process.getuid?.() === 0;

function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
  const round = (x) => Math.round(x * 10) / 10;
  return { n: s.length, p50: round(q(50)), p90: round(q(90)), p99: round(q(99)), mean: round(s.reduce((a, b) => a + b, 0) / s.length), min: round(s[0]), max: round(s[s.length - 1]) };
}

export async function prerequisites() {
  const missing = [];
  if (!existsSync(BWRAP)) missing.push(`${BWRAP} is missing (apt-get install bubblewrap)`);
  if (!existsSync(join(DIST, 'sandbox', 'child-main.js'))) missing.push('dist/ is not built (make build)');
  if (missing.length > 0) return missing;
  const { createBwrapLauncher } = await import('../dist/src/launcher/bwrap.js');
  const { silentLogger } = await import('../dist/src/log.js');
  const check = await createBwrapLauncher({ log: silentLogger() }).check();
  if (!check.ok) missing.push(check.reason ?? 'the bwrap launcher check failed');
  return missing;
}

function timeProcess(argv) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], env: {} });
    let err = '';
    child.stderr.on('data', (c) => (err += c));
    child.once('error', reject);
    child.once('close', (code) => {
      const dt = performance.now() - t0;
      if (code !== 0) reject(new Error(`${argv.slice(0, 3).join(' ')}… exited ${code}: ${err.slice(0, 300)}`));
      else resolve(dt);
    });
  });
}

/** The runtime binds a bare bwrap needs for node (the same idea as the launcher's, nothing else). */
function bareBwrapArgv() {
  const args = [BWRAP, '--unshare-all', '--die-with-parent', '--ro-bind', '/usr', '/usr'];
  for (const name of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
    const path = `/${name}`;
    if (!existsSync(path)) continue;
    const info = lstatSync(path);
    if (info.isSymbolicLink()) args.push('--symlink', readlinkSync(path), path);
    else if (info.isDirectory()) args.push('--ro-bind', path, path);
  }
  const node = realpathSync(process.execPath);
  if (!node.startsWith('/usr/')) {
    const prefix = dirname(dirname(node));
    args.push('--ro-bind', prefix, prefix);
  }
  args.push('--proc', '/proc', '--dev', '/dev', node, '-e', '0');
  return args;
}

async function sandboxStart(log) {
  const { createBwrapLauncher } = await import('../dist/src/launcher/bwrap.js');
  const { DEFAULT_SANDBOX_LIMITS } = await import('../dist/src/launcher/port.js');
  const { startBroker } = await import('../dist/src/broker/broker-server.js');
  const { createStaging, prepareRunRoot, writeRequestFile } = await import('../dist/src/launcher/attempt-dirs.js');
  const { SCHEMA, CHILD_LIMITS, OUTPUT_CAPS } = await import('../dist/src/contracts/constants.js');

  const owner = IS_ROOT ? { uid: 65534, gid: 65534 } : null;
  const launcher = createBwrapLauncher({ log });
  const limits = { ...DEFAULT_SANDBOX_LIMITS, wallMs: 60_000, idleMs: 60_000 };
  const runRoot = join(tmpdir(), `fsn-bench-${randomBytes(4).toString('hex')}`);
  // The run root must exist (0711) before attempt directories are made in it, as the daemon does at start-up.
  prepareRunRoot(runRoot);
  const repo = mkdtempSync(join(tmpdir(), 'fusion-bench-repo-'));
  const { chmodSync, writeFileSync } = await import('node:fs');
  chmodSync(repo, 0o755);
  writeFileSync(join(repo, 'README.md'), '# bench\n', { mode: 0o644 });

  const host = [];
  const bare = [];
  const launcherNode = [];
  const firstRequest = [];
  const childExit = [];
  const argv = bareBwrapArgv();
  try {
    // Round 0 warms the page cache and the launcher's one-time detection; it is not recorded.
    for (let i = 0; i <= START_RUNS; i += 1) {
      const hostMs = await timeProcess([process.execPath, '-e', '0']);
      const bareMs = await timeProcess(argv);
      if (i > 0) {
        host.push(hostMs);
        bare.push(bareMs);
      }

      const outA = createStaging(runRoot, `n${i}`, owner);
      try {
        const t0 = performance.now();
        const h = await launcher.launch({ taskId: 'bench', label: `node-${i}`, repoDir: repo, outDir: outA.outDir, command: ['node', '-e', '0'], limits });
        const exit = await h.exit;
        if (exit.exitCode !== 0) throw new Error(`sandboxed node -e 0 exited ${exit.exitCode}: ${exit.stderrTail}`);
        if (i > 0) launcherNode.push(performance.now() - t0); // the first one also detects the limit backend
      } finally {
        outA.remove();
      }

      const staging = createStaging(runRoot, `c${i}`, owner);
      let tFirst;
      const provider = {
        id: 'bench:first-request',
        engine: 'bench',
        async complete() {
          tFirst ??= performance.now();
          return { content: 'ok', toolCalls: [], stopReason: 'stop', usage: { inputTokens: 1, outputTokens: 1 }, model: 'bench' };
        },
      };
      writeRequestFile(staging, {
        schema_version: SCHEMA.childRequest,
        task_id: 'investigate-bench',
        workflow: 'investigate',
        role: 'candidate',
        slot: 1,
        attempt: i + 1,
        tools: ['read', 'grep', 'find', 'ls'],
        declared_urls: [],
        messages: [{ role: 'system', content: 'bench' }, { role: 'user', content: 'say ok' }],
        limits: { max_model_requests: CHILD_LIMITS.maxModelRequests, max_tool_calls: CHILD_LIMITS.maxToolCalls, max_tool_result_bytes: CHILD_LIMITS.maxToolResultBytes, output_cap_bytes: OUTPUT_CAPS.candidateBytes },
        compression_prompt: 'shorter',
      });
      const broker = await startBroker({ socketPath: staging.socketPath, provider, role: 'candidate', taskId: 'investigate-bench', declaredUrls: [], log, ...(owner ? { socketOwner: owner } : {}) });
      try {
        const t0 = performance.now();
        const h = await launcher.launch({
          taskId: 'investigate-bench',
          label: `candidate-1.attempt-${i + 1}`,
          repoDir: repo,
          outDir: staging.outDir,
          codeDir: DIST,
          brokerSocketPath: staging.socketPath,
          requestFile: staging.requestFile,
          command: ['node', '/opt/fusion/sandbox/child-main.js'],
          env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/tmp', NODE_OPTIONS: '--max-old-space-size=512' },
          limits,
        });
        const exit = await h.exit;
        if (exit.exitCode !== 0 || tFirst === undefined) throw new Error(`bench child failed (exit ${exit.exitCode}): ${exit.stderrTail.slice(0, 300)}`);
        if (i > 0) {
          firstRequest.push(tFirst - t0);
          childExit.push(performance.now() - t0);
        }
      } finally {
        await broker.close();
        staging.remove();
      }
    }
  } finally {
    rmSync(runRoot, { recursive: true, force: true });
    rmSync(repo, { recursive: true, force: true });
  }
  const s = { host_node_ms: stats(host), bare_bwrap_ms: stats(bare), launcher_node_ms: stats(launcherNode), child_first_request_ms: stats(firstRequest), child_exit_ms: stats(childExit) };
  return {
    ...s,
    limit_mechanism: await launcher.limitMechanism(),
    start_overhead_ms: Math.round((s.child_first_request_ms.p50 - s.bare_bwrap_ms.p50) * 10) / 10,
    start_ratio_vs_bare: Math.round((s.child_first_request_ms.p50 / s.bare_bwrap_ms.p50) * 100) / 100,
  };
}

async function fullRuns(log) {
  const { startDaemon, buildConfig } = await import('../dist/src/main.js');
  const { FusionClient } = await import('../dist/src/client/index.js');
  const home = mkdtempSync(join(tmpdir(), 'fusion-bench-run-'));
  const runRoot = join(tmpdir(), `fsn-bench-${randomBytes(4).toString('hex')}`);
  const daemon = await startDaemon(buildConfig({ home, socketPath: join(home, 'fusion.sock'), logLevel: 'silent', sandbox: 'bwrap' }), { log, workflow: { runRoot } });
  const client = new FusionClient(daemon.socketPath);
  const args = {
    objective: 'Find where the task state machine and its transition table are implemented',
    background: ['The daemon moves each Fusion task through the states of docs/behaviour.md#b2'],
    deliverable: 'The file and lines that define the states and allowed transitions',
  };
  const walls = [];
  let last;
  try {
    for (let i = 0; i < FULL_RUNS; i += 1) {
      const t0 = performance.now();
      const receipt = await client.call('POST', '/v1/tasks/investigate', { arguments: args, repo: ROOT });
      const waited = await client.call('GET', `/v1/tasks/${receipt.taskId}/wait?timeoutMs=600000`);
      const wall = performance.now() - t0;
      if (waited.task.state !== 'completed') throw new Error(`run ${i + 1} ended ${waited.task.state}: ${JSON.stringify(waited.task.error)}`);
      walls.push(wall);
      const attempts = await daemon.store.listAttempts(receipt.taskId);
      const span = (stage) => {
        const a = attempts.find((x) => x.stage === stage);
        return a ? Date.parse(a.endedAt) - Date.parse(a.startedAt) : null;
      };
      const cands = attempts.filter((a) => a.stage.startsWith('candidate-'));
      const result = await client.call('GET', `/v1/tasks/${receipt.taskId}/result`);
      last = {
        candidates_stage_ms: Math.max(...cands.map((a) => Date.parse(a.endedAt))) - Math.min(...cands.map((a) => Date.parse(a.startedAt))),
        candidate_ms: Object.fromEntries(cands.map((a) => [a.stage, Date.parse(a.endedAt) - Date.parse(a.startedAt)])),
        evaluator_ms: span('evaluator'),
        merger_ms: span('merger'),
        answer_bytes: result.answer.bytes,
        tool_calls: cands.map((a) => JSON.parse(a.detail ?? '{}').toolCalls ?? null),
        names_state_machine: String(result.answer.text ?? '').includes('src/contracts/task-state.ts'),
      };
    }
  } finally {
    await daemon.close();
    rmSync(home, { recursive: true, force: true });
    rmSync(runRoot, { recursive: true, force: true });
  }
  return { repo: ROOT, full_run_ms: stats(walls), last_run: last };
}

export default async function run() {
  const { silentLogger } = await import('../dist/src/log.js');
  const log = silentLogger();
  const start = await sandboxStart(log);
  const full = await fullRuns(log);
  return { unit: 'ms', start_runs: START_RUNS, ...start, ...full };
}
