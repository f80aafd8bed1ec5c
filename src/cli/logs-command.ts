/**
 * `fusion logs ID [--follow] [--json]`: a task's event log (state changes, each stage attempt
 * and its tool calls, recovery by a restarted daemon, the terminal notification), with the
 * time since the task was created. `--follow` keeps printing until the task ends, with the
 * same heartbeat as `--wait`; `--json` prints the events as NDJSON, one per line.
 */
import type { FusionClient } from '../client/index.js';
import { TaskProgress } from '../client/task-progress.js';
import { has, type FlagSpec, type ParsedArgs } from '../config/args.js';
import type { Io } from './commands.js';
import { showProgress } from './progress.js';
import { printable } from './output/table.js';

export const LOGS_FLAGS: Record<string, FlagSpec> = { follow: {} };

export async function logsCommand(args: ParsedArgs, taskId: string, client: FusionClient, io: Io, heartbeatMs: number): Promise<number> {
  const follow = has(args, 'follow');
  const task = (await client.callRoute('task', { id: taskId })) as { createdAt: string; workflow: string; state: string; status: string; objective?: string | null };
  const events = client.events(taskId, { follow });
  if (has(args, 'json')) {
    for await (const event of events) io.stdout(`${JSON.stringify(event)}\n`);
    return 0;
  }
  io.stdout(`${taskId} (${task.workflow}) created ${task.createdAt}${task.objective ? `: ${printable(task.objective)}` : ''}\n`);
  const progress = new TaskProgress(taskId, task.createdAt);
  // Without --follow the history is printed at once: no heartbeat (a period longer than any print).
  await showProgress(events, progress, (line) => io.stdout(`${line}\n`), follow ? heartbeatMs : 2 ** 31 - 1);
  if (!follow && task.status === 'running') io.stdout(`(still ${task.state}; 'fusion logs ${taskId} --follow' keeps following it)\n`);
  return 0;
}
