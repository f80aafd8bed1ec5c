#!/usr/bin/env node
// Runs every bench/*.bench.mjs and prints ONE JSON object on stdout:
//   { machine: { cpus, cpuModel, node, platform, arch, ci }, results: [ { name, ok, ...result } ] }
// and writes the same object to bench/out/results.json. Progress goes to stderr.
//
// Bench module contract:
//   export default async function run(): Promise<object>      the measurements (JSON-serialisable)
//   export async function prerequisites(): Promise<string[]>  optional: what is missing (empty = ready)
// A bench may also throw an error with `prerequisiteMissing = true` from run().
// A bench whose prerequisites are missing is skipped LOUDLY when CI is not 'true'; in CI it is a
// failure. Any other error is a failure. The exit code is 1 when any bench failed.
//
// Usage: node bench/run.mjs [NAME_SUBSTRING…]   (e.g. `node bench/run.mjs receipt`)
import process from 'node:process';
import { readdirSync, mkdirSync, writeFileSync, existsSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
const OUT_DIR = join(BENCH_DIR, 'out');
const CI = process.env.CI === 'true';
const filters = process.argv.slice(2);

const log = (line) => process.stderr.write(`${line}\n`);

function loudSkip(name, missing) {
  const bar = '!'.repeat(78);
  log(`\n${bar}\n!!! SKIPPING BENCH "${name}": prerequisites missing:\n${missing.map((m) => `!!!   - ${m}`).join('\n')}\n!!! (in CI, CI=true, this is a failure)\n${bar}\n`);
}

async function main() {
  const files = readdirSync(BENCH_DIR)
    .filter((f) => f.endsWith('.bench.mjs'))
    .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
    .sort();
  const distMissing = existsSync(join(BENCH_DIR, '..', 'dist', 'src', 'main.js')) ? [] : ['dist/ is not built (npx tsc -p tsconfig.build.json, or make build)'];
  const results = [];
  let failed = false;
  for (const file of files) {
    const name = file.replace(/\.bench\.mjs$/, '');
    const started = Date.now();
    log(`[bench] ${name}: running…`);
    let missing = [...distMissing];
    try {
      const mod = missing.length > 0 ? undefined : await import(pathToFileURL(join(BENCH_DIR, file)).href);
      if (mod && typeof mod.prerequisites === 'function') missing = [...missing, ...((await mod.prerequisites()) ?? [])];
      if (missing.length === 0) {
        if (typeof mod.default !== 'function') throw new Error(`${file} has no default export function run()`);
        const result = await mod.default();
        results.push({ name, ok: true, durationMs: Date.now() - started, ...result });
        log(`[bench] ${name}: done in ${Date.now() - started} ms`);
        continue;
      }
    } catch (err) {
      if (err && err.prerequisiteMissing === true) {
        missing = [err.message];
      } else {
        failed = true;
        log(`[bench] ${name}: FAILED: ${err && err.stack ? err.stack : String(err)}`);
        results.push({ name, ok: false, error: err instanceof Error ? err.message : String(err) });
        continue;
      }
    }
    if (CI) {
      failed = true;
      log(`[bench] ${name}: FAILED in CI: prerequisites missing: ${missing.join('; ')}`);
      results.push({ name, ok: false, error: `prerequisites missing: ${missing.join('; ')}` });
    } else {
      loudSkip(name, missing);
      results.push({ name, ok: false, skipped: true, reason: `prerequisites missing: ${missing.join('; ')}` });
    }
  }
  const cpuList = cpus();
  const report = {
    machine: { cpus: cpuList.length, cpuModel: cpuList[0]?.model ?? 'unknown', node: process.version, platform: process.platform, arch: process.arch, ci: CI },
    at: new Date().toISOString(),
    results,
  };
  mkdirSync(OUT_DIR, { recursive: true });
  writeFileSync(join(OUT_DIR, 'results.json'), `${JSON.stringify(report, null, 2)}\n`);
  // Exit explicitly once stdout is flushed: a bench that leaks a handle must not hang the run.
  process.stdout.write(`${JSON.stringify(report)}\n`, () => process.exit(failed ? 1 : 0));
}

await main();
