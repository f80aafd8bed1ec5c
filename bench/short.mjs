// Short mode for CI (`BENCH_SHORT=1`): the same measurements and checks with fewer iterations,
// so every benchmark runs on every CI run and cannot rot. Ratios from a short run are noisier;
// compare full runs (`make bench`) for figures.
import process from 'node:process';

export const SHORT = process.env.BENCH_SHORT === '1';

/** Iteration count: an explicit env override wins, then the short or the full default. */
export function iterations(envName, full, short) {
  const raw = process.env[envName];
  if (raw !== undefined) {
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${envName} must be a positive integer, got ${JSON.stringify(raw)}`);
    return n;
  }
  return SHORT ? short : full;
}
