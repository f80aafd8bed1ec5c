// `make cluster-demo`: two daemons on this machine sharing one PostgreSQL database and one Redis
// (throwaway servers), real bwrap sandboxes, builtin engine. Submits work to the first daemon,
// waits for every task through the second, and prints which daemon ran what (the `daemon` field
// of each task's progress events). Everything it starts is stopped and removed at the end.
import console from 'node:console';
import process from 'node:process';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, cpSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { FusionClient } from '../dist/src/client/index.js';
import { startPostgres, startRedis } from './throwaway-servers.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const TASKS = Number(process.env.TASKS ?? 6);
const ARGS = {
  objective: 'Find where the token bucket refills tokens and how the refill rate is applied',
  background: ['Clients report that /login allows bursts after a pause'],
  deliverable: 'The file and lines that implement the refill',
};
const cleanups = [];

function daemon(id, databaseUrl, redisUrl) {
  const home = mkdtempSync(join(tmpdir(), `fusion-demo-${id}-`));
  const runRoot = join(tmpdir(), `fsn-demo-${id}-${process.pid}`);
  const proc = spawn(process.execPath, [join(ROOT, 'test', 'fixtures', 'e2e', 'cluster-daemon.mjs'), home, runRoot, id, databaseUrl, redisUrl, '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  cleanups.push(async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
    }
    rmSync(home, { recursive: true, force: true });
    rmSync(runRoot, { recursive: true, force: true });
  });
  return new Promise((resolveSocket, reject) => {
    let out = '';
    proc.stdout.on('data', (c) => {
      out += c.toString();
      const m = /^READY (\S+)$/m.exec(out);
      if (m) resolveSocket(new FusionClient(m[1]));
    });
    proc.once('exit', (code) => reject(new Error(`daemon ${id} exited (${code})`)));
  });
}

try {
  const pg = await startPostgres();
  cleanups.push(() => pg.stop());
  const redis = await startRedis();
  cleanups.push(() => redis.stop());
  const databaseUrl = await pg.createDatabase();
  console.log(`PostgreSQL ${databaseUrl}\nRedis      ${redis.url}`);
  // The sandbox user must read the repository: a world-readable copy of the fixture.
  const repoRoot = mkdtempSync(join(tmpdir(), 'fusion-demo-repo-'));
  cleanups.push(() => rmSync(repoRoot, { recursive: true, force: true }));
  const repo = join(repoRoot, 'repo');
  cpSync(join(ROOT, 'test', 'fixtures', 'e2e', 'repo'), repo, { recursive: true });
  chmodSync(repoRoot, 0o755);
  const [a, b] = await Promise.all([daemon('daemon-a', databaseUrl, redis.url), daemon('daemon-b', databaseUrl, redis.url)]);
  const started = Date.now();
  const ids = [];
  for (let i = 0; i < TASKS; i++) ids.push((await a.call('POST', '/v1/tasks/investigate', { arguments: ARGS, repo })).taskId);
  console.log(`submitted ${TASKS} tasks to daemon-a; waiting through daemon-b`);
  for (const id of ids) {
    const waited = await b.call('GET', `/v1/tasks/${id}/wait?timeoutMs=300000`);
    const events = [];
    const res = await fetchEvents(b, id);
    for (const line of res.split('\n').filter(Boolean)) events.push(JSON.parse(line));
    const ran = events.map((e) => e.data.daemon).filter((d) => typeof d === 'string');
    console.log(`${id}  ${waited.task.state.padEnd(9)}  ran on ${ran.join(' → ')}`);
  }
  console.log(`all ${TASKS} tasks terminal in ${((Date.now() - started) / 1000).toFixed(1)} s`);
} finally {
  for (const c of cleanups.reverse()) await Promise.resolve().then(c).catch((err) => console.error(err));
}

async function fetchEvents(client, id) {
  const { request } = await import('node:http');
  return new Promise((resolveBody, reject) => {
    const req = request({ socketPath: client.socketPath, path: `/v1/tasks/${id}/events?follow=false`, method: 'GET' }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c.toString()));
      res.on('end', () => resolveBody(body));
    });
    req.on('error', reject);
    req.end();
  });
}
