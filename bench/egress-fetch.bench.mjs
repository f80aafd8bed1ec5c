/**
 * Guarded fetch + extraction of a 1 MiB HTML page vs a plain undici request + the same
 * extraction, against the same loopback origin in the same run (interleaved, so machine load
 * hits both sides alike). Reports the p50 of each and the overhead ratio (target ≤ 1.10).
 *
 * The guarded side pays for URL shaping, host vetting, the pinned connector (a fresh connection
 * per fetch), header checks, hashing and the worker-thread hop of the extraction; the plain
 * side reuses undici's global keep-alive pool and extracts on the main thread.
 *
 * Run: node bench/run.mjs egress (after a build). Traffic stays on 127.0.0.2.
 * Env: BENCH_EGRESS_ITERATIONS (default 10), BENCH_EGRESS_WARMUP (default 2).
 */
import { iterations as iterationCount } from './short.mjs';
import http from 'node:http';
import net from 'node:net';
import process from 'node:process';
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { request } from 'undici';
import { pino } from 'pino';
import { createGuardedFetch } from '../dist/src/egress/guarded-fetch.js';
import { extractContent } from '../dist/src/egress/extract.js';
import { DEFAULT_MAX_OUTPUT_BYTES } from '../dist/src/egress/constants.js';

const ORIGIN_IP = '127.0.0.2';
const PAGE_BYTES = 1024 * 1024;

function page(bytes) {
  const parts = ['<!doctype html><html><head><title>Bench</title><style>body{color:#333}</style><script>var x = 1;</script></head><body>'];
  let size = parts[0].length;
  for (let i = 0; size < bytes - 20; i++) {
    const section =
      `<section><h2>Section ${i}</h2><p>Paragraph ${i} with <a href="/link/${i}">a link</a>, <strong>bold</strong> and <em>emphasis</em>. ` +
      'Lorem ipsum dolor sit amet, consectetur adipiscing elit.</p><ul><li>item one</li><li>item two</li></ul>' +
      `<table><tr><th>k</th><th>v</th></tr><tr><td>${i}</td><td>value</td></tr></table><pre><code>const v${i} = ${i};</code></pre></section>`;
    parts.push(section);
    size += section.length;
  }
  parts.push('</body></html>');
  return Buffer.from(parts.join(''));
}

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const round = (n) => Math.round(n * 100) / 100;

/** The origin needs 127.0.0.2 (Linux routes all of 127/8 to lo; macOS needs an lo0 alias). */
export async function prerequisites() {
  const server = net.createServer();
  try {
    await new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, ORIGIN_IP, resolve);
    });
    return [];
  } catch (err) {
    return [`cannot listen on ${ORIGIN_IP} (${err.code ?? err.message}); on macOS: sudo ifconfig lo0 alias ${ORIGIN_IP}`];
  } finally {
    server.close();
  }
}

export default async function run(options = {}) {
  const iterations = options.iterations ?? iterationCount('BENCH_EGRESS_ITERATIONS', 10, 3);
  const warmup = options.warmup ?? Number(process.env.BENCH_EGRESS_WARMUP ?? 2);
  const body = page(PAGE_BYTES);
  const small = Buffer.from('<h1>Small</h1><p>A <a href="/x">link</a>.</p>');
  const server = http.createServer((req, res) => {
    const payload = req.url === '/small' ? small : body;
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': String(payload.length) });
    res.end(payload);
  });
  // Long server keep-alive: undici's pool (plain side) must not race the server's idle close.
  server.keepAliveTimeout = 120_000;
  await new Promise((resolve) => server.listen(0, ORIGIN_IP, resolve));
  const port = server.address().port;

  const guarded = createGuardedFetch({
    log: pino({ level: 'silent' }),
    resolveOverrides: new Map([['bench.test', ORIGIN_IP]]),
    allowCidrs: [`${ORIGIN_IP}/32`],
  });
  const guardedUrl = `http://bench.test:${port}/page`;
  const plainUrl = `http://${ORIGIN_IP}:${port}/page`;

  async function guardedOnce(path) {
    const result = await guarded({ url: guardedUrl.replace('/page', path), extract: 'markdown' });
    return result.content;
  }

  async function plainOnce(path) {
    const response = await request(plainUrl.replace('/page', path), { method: 'GET', headers: { 'accept-encoding': 'identity' } });
    const bytes = new Uint8Array(await response.body.arrayBuffer());
    const out = extractContent({ body: bytes, mediaType: 'text/html', charset: 'utf-8', extract: 'markdown', baseUrl: guardedUrl.replace('/page', path), maxOutputBytes: DEFAULT_MAX_OUTPUT_BYTES });
    return out.content;
  }

  let sameOutput = true;
  /** Interleaved rounds; the order alternates so drift in machine load favours neither side. */
  async function measure(path, rounds, skip) {
    const guardedMs = [];
    const plainMs = [];
    // Process CPU time (all threads, so the extraction worker counts): robust against other
    // load on a shared machine, which wall-clock p50s are not.
    const guardedCpuMs = [];
    const plainCpuMs = [];
    for (let i = 0; i < skip + rounds; i++) {
      const order = i % 2 === 0 ? ['guarded', 'plain'] : ['plain', 'guarded'];
      const outputs = {};
      for (const side of order) {
        const started = performance.now();
        const cpuStart = process.cpuUsage();
        outputs[side] = side === 'guarded' ? await guardedOnce(path) : await plainOnce(path);
        const elapsed = performance.now() - started;
        const cpu = process.cpuUsage(cpuStart);
        if (i >= skip) {
          (side === 'guarded' ? guardedMs : plainMs).push(elapsed);
          (side === 'guarded' ? guardedCpuMs : plainCpuMs).push((cpu.user + cpu.system) / 1000);
        }
      }
      if (outputs.guarded !== outputs.plain) sameOutput = false;
    }
    return { guardedMs, plainMs, guardedCpuMs, plainCpuMs };
  }

  let guardedMs;
  let plainMs;
  let guardedCpuMs;
  let plainCpuMs;
  let smallRuns;
  try {
    ({ guardedMs, plainMs, guardedCpuMs, plainCpuMs } = await measure('/page', iterations, warmup));
    // Diagnostic: the guard's fixed per-fetch cost, visible only when extraction is tiny.
    smallRuns = await measure('/small', 50, 5);
  } finally {
    await guarded.close();
    server.closeAllConnections?.();
    await new Promise((resolve) => server.close(resolve));
  }

  const guardedP50 = percentile(guardedMs, 50);
  const plainP50 = percentile(plainMs, 50);
  const ratio = guardedP50 / plainP50;
  return {
    name: 'egress-fetch',
    page_bytes: body.length,
    iterations,
    guarded_p50_ms: round(guardedP50),
    plain_p50_ms: round(plainP50),
    guarded_p95_ms: round(percentile(guardedMs, 95)),
    plain_p95_ms: round(percentile(plainMs, 95)),
    overhead_ratio: round(ratio),
    // Median of the per-round guarded/plain ratios: each round's pair ran back to back, so this
    // cancels slow drift in machine load better than the ratio of the two medians.
    paired_ratio_p50: round(percentile(guardedMs.map((g, i) => g / plainMs[i]), 50)),
    guarded_cpu_p50_ms: round(percentile(guardedCpuMs, 50)),
    plain_cpu_p50_ms: round(percentile(plainCpuMs, 50)),
    cpu_overhead_ratio: round(percentile(guardedCpuMs, 50) / percentile(plainCpuMs, 50)),
    target_ratio: 1.1,
    within_target: ratio <= 1.1,
    same_output: sameOutput,
    small_page_guarded_p50_ms: round(percentile(smallRuns.guardedMs, 50)),
    small_page_plain_p50_ms: round(percentile(smallRuns.plainMs, 50)),
  };
}
