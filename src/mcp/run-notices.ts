/**
 * The end of each research run this session created that had not ended yet, sent as a
 * `notifications/message` so the agent waits for it instead of polling. The research API has no
 * event stream, so each such run is looked at every RUN_POLL_MS until it ends.
 */
import type { FusionClient } from '../client/index.js';
import type { ResearchRunView } from '../client/types.js';
import { TERMINAL_RUN, runLine } from './research-text.js';

/** How often a created research run is looked at until it ends. */
const RUN_POLL_MS = 250;

export interface RunNotices {
  /** Follows `run` (created by this session with `apiKey`) and announces its end, after the tool's reply. */
  watch(run: ResearchRunView, apiKey: string): void;
  /** Resolves once every followed run was announced or given up (abort the session's signal first). */
  close(): Promise<void>;
}

export function startRunNotices(options: {
  client: FusionClient;
  /** The session's signal: a followed run is given up once it is aborted. */
  signal: AbortSignal;
  announce: (data: unknown) => void;
}): RunNotices {
  const watches: Array<Promise<void>> = [];
  return {
    watch(run, apiKey) {
      const follow = async (): Promise<void> => {
        let current = run;
        while (!TERMINAL_RUN.has(current.status)) {
          await new Promise((resolve) => setTimeout(resolve, RUN_POLL_MS));
          if (options.signal.aborted) return;
          current = await options.client.getRun(run.id, { apiKey });
        }
        options.announce({ runId: current.id, status: current.status, error: current.error, resultDocumentId: current.resultDocumentId, summary: runLine(current) });
      };
      // Sent after the tool's reply, even when the run had already ended (direct dispatch).
      watches.push(new Promise<void>((resolve) => setImmediate(() => void follow().catch(() => undefined).finally(resolve))));
    },
    async close() {
      await Promise.allSettled(watches);
    },
  };
}
