// Helper process for bench/steady-state.bench.mjs (not a bench itself): the real daemon with the
// builtin engine and bwrap, started with --expose-gc. On SIGUSR2 it collects garbage twice and
// prints `MEM {…}` (process.memoryUsage(), smaps Anonymous, V8 space sizes) then `RSS <bytes>`
// on stdout. Usage: node --expose-gc bench/steady-daemon.mjs HOME
import process from 'node:process';
import { setTimeout } from 'node:timers';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { getHeapSpaceStatistics } from 'node:v8';
import { startDaemon, buildConfig } from '../dist/src/main.js';
import { silentLogger } from '../dist/src/log.js';

const [home] = process.argv.slice(2);
const config = buildConfig({ home, socketPath: join(home, 'fusion.sock'), logLevel: 'silent', sandbox: 'bwrap', taskConcurrency: 2, maxQueuedTasks: 100_000, maxQueuedPerCaller: 100_000 });
const daemon = await startDaemon(config, { log: silentLogger() });
process.on('SIGUSR2', () => {
  globalThis.gc?.();
  setTimeout(() => {
    globalThis.gc?.();
    const mem = process.memoryUsage();
    // Where the growth sits: JS heap, external buffers, or native anonymous memory.
    let anon = '';
    try {
      anon = /^Anonymous:\s+(\d+) kB/m.exec(readFileSync('/proc/self/smaps_rollup', 'utf8'))?.[1] ?? '';
    } catch {
      // Not Linux: the rollup is optional detail.
    }
    // Per V8 space: the young generation (new_space) grows with allocation rate and is only
    // reserved, not live; old/code/large-object spaces hold what survives.
    const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, { size: s.space_size, used: s.space_used_size }]));
    process.stdout.write(`MEM ${JSON.stringify({ ...mem, anonKb: Number(anon) || undefined, spaces })}\n`);
    process.stdout.write(`RSS ${mem.rss}\n`);
  }, 200);
});
process.stdout.write(`READY ${daemon.socketPath}\n`);
process.once('SIGTERM', () => daemon.close().then(() => process.exit(0)));
