/**
 * `--wait` and `fusion logs --follow`: a task's events as progress lines on stderr (elapsed
 * time, state changes, per-candidate tool calls) until its terminal event, with a heartbeat
 * line whenever nothing was shown for a while, so a task whose model thinks for minutes is
 * visibly alive. The heartbeat period is FUSION_PROGRESS_HEARTBEAT_S (default 15 s).
 */
import { TaskProgress } from '../client/task-progress.js';
import type { FusionClient } from '../client/index.js';
import type { TaskEvent } from '../store/port.js';
import { usageError } from '../config/args.js';
import type { Env } from '../config/settings.js';
import type { Io } from './commands.js';

export const DEFAULT_HEARTBEAT_MS = 15_000;

/** The heartbeat period from the environment (whole seconds, 1 to 3600). */
export function heartbeatMsOf(env: Env): number {
  const text = env.FUSION_PROGRESS_HEARTBEAT_S;
  if (text === undefined || text.trim() === '') return DEFAULT_HEARTBEAT_MS;
  const s = Number(text.trim());
  if (!Number.isInteger(s) || s < 1 || s > 3600) throw usageError(`FUSION_PROGRESS_HEARTBEAT_S must be a whole number of seconds from 1 to 3600, got ${JSON.stringify(text)}`);
  return s * 1000;
}

/** Shows `events` (one task's stream) as progress lines on `write`; resolves when the stream ends. */
export async function showProgress(events: AsyncIterable<TaskEvent>, progress: TaskProgress, write: (line: string) => void, heartbeatMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const arm = (): void => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      write(progress.heartbeat(Date.now()));
      arm();
    }, heartbeatMs);
  };
  arm();
  try {
    for await (const event of events) {
      const line = progress.update(event);
      if (line === undefined) continue;
      write(line);
      arm();
    }
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Streams a task's events to stderr as progress lines until its terminal event (`--wait`: the
 * result, its error in full, is printed next, so the last line does not repeat the message).
 */
export async function followProgress(client: FusionClient, taskId: string, io: Io, heartbeatMs = DEFAULT_HEARTBEAT_MS): Promise<void> {
  await showProgress(client.events(taskId), new TaskProgress(taskId, undefined, { resultFollows: true }), (line) => io.stderr(`${line}\n`), heartbeatMs);
}
