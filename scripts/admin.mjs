#!/usr/bin/env node
// Admin helper behind the make targets (mk/admin.mk); talks to the running daemon over its
// socket ($FUSION_SOCKET, else $FUSION_HOME/fusion.sock, like the CLI).
//   node scripts/admin.mjs status          a short health summary and the 10 newest tasks (a table)
//   node scripts/admin.mjs status --json   the full health reply and the 20 newest tasks, as JSON
//   node scripts/admin.mjs run JOB…        runs maintenance jobs now (retention, reaper, stale-sweep, backup)
// Exit 0 on success, 3 when no daemon answers, 1 otherwise.
import process from 'node:process';
import { FusionClient } from '../dist/src/client/index.js';
import { resolveSocket } from '../dist/src/config/settings.js';
import { parseArgs } from '../dist/src/config/args.js';
import { tasksTable } from '../dist/src/cli/tasks-command.js';
import { formatDuration } from '../dist/src/client/task-progress.js';
import { quietOnEpipe } from '../dist/src/cli/daemon-gone.js';

// `make status | head -3`: end quietly when the reader goes away, like the CLI.
quietOnEpipe(process.stdout);

const [command, ...rest] = process.argv.slice(2);
const client = new FusionClient(resolveSocket(parseArgs([], {}), process.env));
const print = (value) => process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);

try {
  if (command === 'status' && rest[0] === '--json') {
    const health = await client.call('GET', '/v1/health');
    const { tasks } = await client.call('GET', '/v1/tasks?limit=20');
    print({ health, tasks });
  } else if (command === 'status') {
    const health = await client.call('GET', '/v1/health');
    const { tasks } = await client.call('GET', '/v1/tasks?limit=10');
    const up = formatDuration(Date.now() - Date.parse(health.startedAt));
    process.stdout.write(`daemon ${health.ok ? 'ok' : 'NOT OK'}: version ${health.version}, up ${up}, socket ${client.socketPath}\n`);
    // One line per part of the health reply: its scalar fields and lists (`none` for an empty
    // list); the sandbox line also names the Docker image (a top-level `sandboxImage`).
    for (const [key, value] of Object.entries(health)) {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) continue;
      const fields = Object.entries(value)
        .filter(([, v]) => v === null || typeof v !== 'object' || Array.isArray(v))
        .map(([k, v]) => `${k} ${Array.isArray(v) ? (v.length === 0 ? 'none' : v.join(' ')) : String(v)}`);
      if (key === 'sandbox' && 'sandboxImage' in health) fields.push(`image ${health.sandboxImage ?? 'none (not Docker)'}`);
      if (fields.length > 0) process.stdout.write(`  ${key}: ${fields.join(', ').slice(0, 160)}\n`);
    }
    process.stdout.write(`\n${tasksTable(tasks, Date.now(), process.stdout.isTTY ? process.stdout.columns : 160)}`);
    process.stdout.write('(full health and task JSON: make status-json)\n');
  } else if (command === 'run' && rest.length > 0) {
    for (const job of rest) print(await client.call('POST', `/v1/admin/maintenance/${job}`));
  } else {
    process.stderr.write('usage: node scripts/admin.mjs status | run JOB…\n');
    process.exitCode = 2;
  }
} catch (err) {
  process.stderr.write(`admin: ${err.code ?? 'error'}: ${err.message}\n`);
  process.exitCode = err.code === 'daemon_unavailable' ? 3 : 1;
}
