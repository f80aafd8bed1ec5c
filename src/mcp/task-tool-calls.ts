/**
 * The task tools: `fusion_investigate` and `fusion_research` submit a durable task to the daemon
 * (its terminal event then comes as a notification, task-notices.ts), and `bg_result`,
 * `bg_status` and `bg_cancel` read or cancel one.
 */
import type { FusionClient } from '../client/index.js';
import type { BgResult, TaskView } from '../client/types.js';
import { readableHere } from '../common/readable.js';
import type { DaemonSeamsCheck } from './daemon-seams.js';
import type { RepoResolver } from './repo-roots.js';
import type { TaskNotices } from './task-notices.js';
import { textResult, toolArgs, type ToolHandler } from './tool-call.js';

export type TaskToolName = 'fusion_investigate' | 'fusion_research' | 'bg_result' | 'bg_status' | 'bg_cancel';

function taskLine(task: TaskView): string {
  const err = task.error ? ` — ${task.error.code} (while ${task.error.state}): ${task.error.message}` : '';
  return `Task ${task.taskId} (${task.workflow}) is ${task.state} (${task.status})${err}.`;
}

export function taskToolCalls(deps: { client: FusionClient; resolveRepo: RepoResolver; checkDaemonSeams: DaemonSeamsCheck; notices: TaskNotices }): Record<TaskToolName, ToolHandler> {
  const { client } = deps;

  const submit = (name: 'fusion_investigate' | 'fusion_research'): ToolHandler => async (raw, call) => {
    // The daemon validates the arguments (the contract's exact messages); `repo` is this server's.
    const target = deps.resolveRepo(name, raw);
    if (name === 'fusion_research') await deps.checkDaemonSeams(name);
    const receipt = await client.submit(name === 'fusion_investigate' ? 'investigate' : 'research', target.rest, { repo: target.repo });
    deps.notices.submitted(receipt, call.progressToken);
    return textResult(receipt.text, receipt);
  };

  /** An artifact this process cannot open (a socket-group member; another host's copy) comes over the socket. */
  const artifactText = async (id: string, path: string | undefined, sha256: string): Promise<string> => {
    if (path !== undefined && readableHere(path)) return `The answer is stored at ${path} (delivery: artifact).`;
    return (await client.answer(id, sha256)).toString('utf8');
  };

  return {
    fusion_investigate: submit('fusion_investigate'),
    fusion_research: submit('fusion_research'),
    async bg_result(raw) {
      const a = toolArgs<{ taskId: string; delivery?: 'auto' | 'inline' | 'artifact' }>('bg_result', raw);
      const id = a.taskId.trim();
      const result: BgResult = await client.result(id, { delivery: a.delivery ?? 'auto' });
      const answer = result.answer;
      const text = answer.present
        ? `${answer.header}\n\n${answer.text ?? (await artifactText(id, answer.path, answer.sha256))}`
        : result.status === 'running'
          ? `Task ${id} is still running. Wait for the terminal notification. Do not poll.`
          : `Task ${id} ${result.status}: no answer was committed.${result.error ? ` ${result.error.code}: ${result.error.message}` : ''}`;
      return textResult(text, result, !answer.present && result.status !== 'running');
    },
    async bg_status(raw) {
      const task = await client.status(toolArgs<{ taskId: string }>('bg_status', raw).taskId.trim());
      return textResult(taskLine(task), task);
    },
    async bg_cancel(raw) {
      const id = toolArgs<{ taskId: string }>('bg_cancel', raw).taskId.trim();
      const task = await client.cancel(id);
      // Cancelling an ended task changes nothing; the reply says so rather than failing.
      const line = task.status === 'cancelled' ? `Cancelled task ${id}.` : task.status === 'running' ? taskLine(task) : `Task ${id} had already ended (${task.status}); nothing was cancelled.`;
      return textResult(line, task);
    },
  };
}
