/**
 * Repository snapshots (docs/operations.md#repository-snapshots): what packing costs when a run
 * starts, and what reading a cap-sized bundle costs the daemon's event loop.
 *
 * - pack: the packer over this checkout (its .gitignore leaves node_modules/, dist/ out) and over
 *   the small e2e fixture, in-process (a root caller) through the worker thread the daemon uses;
 *   and the fixture as a non-root caller (the setpriv child) when run as root.
 * - event loop: the longest event-loop delay (perf_hooks.monitorEventLoopDelay) while an archive
 *   of tiny entries at the bundle cap is read strictly and unpacked. Baseline, in the same run: the
 *   strict read on the main thread (what the daemon did before the worker); measured: the
 *   snapshot cache's install (worker thread). Goal: a max delay under 0.1 of the baseline's.
 *
 * Run: node bench/run.mjs repo-snapshot (after a build). BENCH_SHORT=1: a 64 MiB archive instead
 * of 256 MiB. BENCH_SNAPSHOT_REPO=/path packs another checkout as well.
 */
import process from 'node:process';
import { Buffer } from 'node:buffer';
import { setTimeout } from 'node:timers';
import { performance, monitorEventLoopDelay } from 'node:perf_hooks';
import { cpSync, mkdtempSync, rmSync, chmodSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeBundleTar, readBundleTar } from '../dist/src/bundles/bundle-tar.js';
import { packRepo, MAX_BUNDLE_ENTRIES } from '../dist/src/bundles/pack-as-caller.js';
import { createBundleCache } from '../dist/src/bundles/bundle-cache.js';
import { DEFAULT_REPO_EXCLUDES } from '../dist/src/bundles/excludes.js';
import { createLogger } from '../dist/src/log.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const FIXTURE = join(ROOT, 'test', 'fixtures', 'e2e', 'repo');
const SHORT = process.env.BENCH_SHORT === '1';
const CAP = (SHORT ? 64 : 256) * 1024 * 1024;
const log = createLogger({ level: 'silent' });

async function timedPack(repo, caller) {
  const t0 = performance.now();
  const packed = await packRepo({ repo, exclude: DEFAULT_REPO_EXCLUDES, maxBytes: 256 * 1024 * 1024, ...(caller ? { caller } : {}) });
  return { ms: Math.round(performance.now() - t0), entries: packed.entries, bytes: packed.data.length, skipped: packed.skipped.counts };
}

async function loopDelay(work) {
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  // Armed before the work starts (a synchronous block right away would precede its first timer).
  await new Promise((r) => setTimeout(r, 30));
  const t0 = performance.now();
  await work();
  const ms = performance.now() - t0;
  // A blocked loop's delay is recorded when the monitor's timer next runs: let it.
  await new Promise((r) => setTimeout(r, 50));
  h.disable();
  return { maxDelayMs: Math.round(h.max / 1e6), p99DelayMs: Math.round(h.percentile(99) / 1e6), wallMs: Math.round(ms) };
}

export default async function run() {
  const pack = { thisCheckout: await timedPack(ROOT), fixture: await timedPack(FIXTURE) };
  if (process.env.BENCH_SNAPSHOT_REPO) pack.other = { repo: process.env.BENCH_SNAPSHOT_REPO, ...(await timedPack(process.env.BENCH_SNAPSHOT_REPO)) };
  if (process.getuid?.() === 0) {
    const home = mkdtempSync(join(tmpdir(), 'fusion-bench-snap-'));
    try {
      cpSync(FIXTURE, join(home, 'repo'), { recursive: true });
      execFileSync('chown', ['-R', '65534:65534', home]);
      chmodSync(home, 0o700);
      pack.fixtureAsCaller = await timedPack(join(home, 'repo'), { uid: 65534, gid: 65534, groups: [] });
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }

  // A cap-sized archive of one-byte files (1 KiB of archive each), 500 to a directory.
  const entries = [];
  const perEntry = 1024;
  const count = Math.min(MAX_BUNDLE_ENTRIES, Math.floor((CAP - 1024) / perEntry) - 1000);
  for (let i = 0, d = -1; i < count; i++) {
    if (i % 500 === 0) entries.push({ type: 'dir', path: `d${++d}` });
    entries.push({ type: 'file', path: `d${d}/f${i}`, executable: false, data: Buffer.from('x') });
  }
  const data = writeBundleTar(entries);
  const limits = { maxBytes: CAP, maxEntries: MAX_BUNDLE_ENTRIES };
  const baseline = await loopDelay(async () => readBundleTar(data, limits));
  const dir = mkdtempSync(join(tmpdir(), 'fusion-bench-cache-'));
  let measured;
  try {
    const cache = await createBundleCache({ dir, maxBytes: CAP, log });
    const { createHash } = await import('node:crypto');
    const digest = createHash('sha256').update(data).digest('hex');
    measured = await loopDelay(() => cache.install({ digest, data }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return {
    short: SHORT,
    pack,
    eventLoop: {
      archiveBytes: CAP, entries: entries.length,
      baselineMainThreadRead: baseline,
      workerInstall: measured,
      ratio: Number((measured.maxDelayMs / Math.max(1, baseline.maxDelayMs)).toFixed(3)),
      goal: 'the install\'s max loop delay < 0.1 of the main-thread read\'s (same run)',
      met: measured.maxDelayMs < 0.1 * Math.max(1, baseline.maxDelayMs),
    },
  };
}
