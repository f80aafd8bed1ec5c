// Shared pieces of the latency benches (not a bench itself): percentile stats, the "floor"
// database (a bare fsync'd SQLite insert, the cheapest durable commit a receipt could cost), and
// the interleaved measurement loop (each round runs every operation once, in rotating order, so
// machine noise lands on all of them alike).
import sqlite3 from 'sqlite3';

export function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
  const round = (x) => Math.round(x * 1000) / 1000;
  return { n: s.length, p50: round(q(50)), p90: round(q(90)), p99: round(q(99)), mean: round(s.reduce((a, b) => a + b, 0) / s.length), min: round(s[0]), max: round(s[s.length - 1]) };
}

export function sqliteRun(db, sql, params = []) {
  return new Promise((resolve, reject) => db.run(sql, params, (err) => (err ? reject(err) : resolve())));
}

/** A WAL, synchronous=FULL database with one table, configured like the daemon's store. */
export async function openFloorDb(file) {
  const db = await new Promise((resolve, reject) => {
    const d = new sqlite3.Database(file, (err) => (err ? reject(err) : resolve(d)));
  });
  const mode = await new Promise((resolve, reject) => db.get('PRAGMA journal_mode = WAL', (err, row) => (err ? reject(err) : resolve(row))));
  if (mode.journal_mode !== 'wal') throw new Error(`floor database is not in WAL mode: ${mode.journal_mode}`);
  await sqliteRun(db, 'PRAGMA synchronous = FULL');
  await sqliteRun(db, 'CREATE TABLE rows (id TEXT PRIMARY KEY, payload TEXT NOT NULL, created_at TEXT NOT NULL)');
  return db;
}

/** Runs `warmup + n` rounds; each round calls every op once (rotating order), recording after warm-up. */
export async function interleaved(ops, warmup, n) {
  const names = Object.keys(ops);
  for (let i = 0; i < warmup + n; i += 1) {
    const record = i >= warmup;
    for (let k = 0; k < names.length; k += 1) await ops[names[(i + k) % names.length]](record);
  }
}
