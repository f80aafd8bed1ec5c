#!/usr/bin/env node
// Admin helper behind the make targets (mk/admin.mk); talks to the running daemon over its
// socket ($FUSION_SOCKET, else $FUSION_HOME/fusion.sock, like the CLI).
//   node scripts/admin.mjs status          health JSON, then the 20 newest tasks
//   node scripts/admin.mjs run JOB…        runs maintenance jobs now (retention, reaper, stale-sweep, backup)
// Exit 0 on success, 3 when no daemon answers, 1 otherwise.
import process from 'node:process';
import { FusionClient } from '../dist/src/client/index.js';
import { resolveSocket } from '../dist/src/config/settings.js';
import { parseArgs } from '../dist/src/config/args.js';

const [command, ...rest] = process.argv.slice(2);
const client = new FusionClient(resolveSocket(parseArgs([], {}), process.env));
const print = (value) => process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);

try {
  if (command === 'status') {
    print(await client.call('GET', '/v1/health'));
    const { tasks } = await client.call('GET', '/v1/tasks?limit=20');
    for (const t of tasks) process.stdout.write(`${t.taskId}  ${t.state.padEnd(20)}  ${t.updatedAt}${t.error ? `  ${t.error.code}` : ''}\n`);
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
