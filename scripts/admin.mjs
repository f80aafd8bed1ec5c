#!/usr/bin/env node
// Admin helper behind the make targets (mk/admin.mk); talks to the running daemon over its
// socket ($FUSION_SOCKET, else $FUSION_HOME/fusion.sock, like the CLI).
//   node scripts/admin.mjs status          a short health summary and the 10 newest tasks (a table)
//   node scripts/admin.mjs status --json   the full health reply and the 20 newest tasks, as JSON
//   node scripts/admin.mjs run JOB…        runs maintenance jobs now (retention, reaper, stale-sweep, backup)
// Exit 0 on success, 3 when no daemon answers, 1 otherwise (make reports a failed recipe as
// `Error 3` and itself exits 2).
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

/** A health field as a few words: a scalar as is, a thing by its `id`, a list item by item; undefined for other objects. */
function brief(v) {
  if (v === null || typeof v !== 'object') return String(v);
  if (Array.isArray(v)) return v.length === 0 ? 'none' : v.map((x) => brief(x) ?? '?').join(' ');
  return typeof v.id === 'string' ? v.id : undefined;
}

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
    // One line per part of the health reply: its scalar fields, lists (`none` for an empty
    // list) and named things (a model by its id, so the providers line shows the candidates, the
    // evaluator and the merger); the sandbox line also names the Docker image (a top-level
    // `sandboxImage`).
    for (const [key, value] of Object.entries(health)) {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) continue;
      const fields = Object.entries(value)
        .map(([k, v]) => [k, brief(v)])
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => `${k} ${v}`);
      if (key === 'sandbox' && 'sandboxImage' in health) fields.push(`image ${health.sandboxImage ?? 'none (not Docker)'}`);
      // Advice for the admin (a stale child image) gets a line of its own, whole.
      const warning = typeof value.warning === 'string' ? value.warning : undefined;
      const shown = warning === undefined ? fields : fields.filter((f) => !f.startsWith('warning '));
      if (shown.length > 0) process.stdout.write(`  ${key}: ${shown.join(', ').slice(0, 240)}\n`);
      if (warning !== undefined) process.stdout.write(`  ${key} WARNING: ${warning}\n`);
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
  if (err.code === 'daemon_unavailable') {
    // The client's own hint (`--wait` runs a daemon for a task) fits a task, not these targets.
    process.stderr.write(`admin: daemon_unavailable: no fusion daemon answers on ${client.socketPath}; these targets ask a running daemon: start one (make daemon, or fusion daemon), or name its data directory with FUSION_HOME\n`);
    process.exitCode = 3;
  } else {
    process.stderr.write(`admin: ${err.code ?? 'error'}: ${err.message}\n`);
    process.exitCode = 1;
  }
}
