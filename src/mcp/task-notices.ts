/**
 * The notifications of the tasks this session submitted, from one event stream for the whole
 * session: each one's terminal event as a `notifications/message`, so the agent waits instead of
 * polling; and for a task submitted with a `progressToken`, each event (state change, candidate
 * attempt, tool-call count) as a `notifications/progress` for that token, and a heartbeat while it
 * is silent, until it ends (the same lines as the CLI's --wait, src/client/task-progress.ts).
 */
import type { FusionClient } from '../client/index.js';
import { TaskProgress } from '../client/task-progress.js';
import type { Send } from './session-output.js';

/** Terminal events of tasks not (yet) known as this session's, kept for a receipt processed late. */
const RECENT_TERMINALS = 256;

export interface TaskNotices {
  /** A receipt this session got: its terminal event is announced, at once when it came first. */
  submitted(receipt: { taskId: string; createdAt: string }, progressToken?: string | number): void;
  /** Stops the heartbeat now; resolves once the event stream has ended (abort the session's signal). */
  close(): Promise<void>;
}

export function startTaskNotices(options: {
  client: FusionClient;
  /** The session's signal: aborting it ends the event stream. */
  signal: AbortSignal;
  send: Send;
  announce: (data: unknown) => void;
  heartbeatMs: number;
}): TaskNotices {
  const { send, announce } = options;
  const submitted = new Set<string>();
  // A fast task can finish before its receipt reply is processed: keep recent terminals briefly.
  const recentTerminals = new Map<string, unknown>();
  const progressOf = new Map<string, { token: string | number; progress: TaskProgress }>();
  const sendProgress = (entry: { token: string | number; progress: TaskProgress }, message: string): void =>
    send({ method: 'notifications/progress', params: { progressToken: entry.token, progress: entry.progress.count, message } });
  const heartbeat = setInterval(() => {
    for (const entry of progressOf.values()) {
      entry.progress.count += 1;
      sendProgress(entry, entry.progress.heartbeat(Date.now()));
    }
  }, options.heartbeatMs);
  heartbeat.unref();
  const watch = (async () => {
    for await (const event of options.client.allEvents({ signal: options.signal })) {
      const tracked = progressOf.get(event.taskId);
      if (tracked !== undefined) {
        const line = tracked.progress.update(event);
        if (line !== undefined) sendProgress(tracked, line);
        if (event.kind === 'terminal') progressOf.delete(event.taskId);
      }
      if (event.kind !== 'terminal') continue;
      if (submitted.has(event.taskId)) {
        announce(event.data);
        continue;
      }
      recentTerminals.set(event.taskId, event.data);
      if (recentTerminals.size > RECENT_TERMINALS) recentTerminals.delete(recentTerminals.keys().next().value as string);
    }
  })().catch(() => undefined);

  return {
    submitted(receipt, progressToken) {
      submitted.add(receipt.taskId);
      if (progressToken !== undefined && recentTerminals.get(receipt.taskId) === undefined) progressOf.set(receipt.taskId, { token: progressToken, progress: new TaskProgress(receipt.taskId, receipt.createdAt) });
      const early = recentTerminals.get(receipt.taskId);
      if (early !== undefined) setImmediate(() => announce(early));
    },
    close() {
      clearInterval(heartbeat);
      return watch;
    },
  };
}
