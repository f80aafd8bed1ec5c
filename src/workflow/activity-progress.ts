/**
 * A running candidate's `activity` progress events: how many tool calls its model has asked
 * for so far (and model requests), so `--wait`, `fusion logs` and MCP progress can show that a
 * task silent for minutes is working. Each event is a row in the task's event log, so they
 * are spaced (at most one per ACTIVITY_EVENT_MS, only when the count changed) rather than one
 * per call; the attempt's final count rides on its settled event.
 */
export const ACTIVITY_EVENT_MS = 5_000;

export interface ActivityCounts {
  toolCalls: number;
  modelRequests: number;
}

/** Returns the function to call on every broker activity; it reports when due. */
export function activityReporter(
  report: (data: Record<string, unknown>) => Promise<void>,
  counts: () => ActivityCounts,
  where: { stage: string; attempt: number },
  now: () => number = Date.now,
): () => void {
  let last = Number.NEGATIVE_INFINITY;
  let sent = 0;
  let reporting = false;
  return () => {
    const c = counts();
    if (reporting || c.toolCalls === sent || now() - last < ACTIVITY_EVENT_MS) return;
    last = now();
    sent = c.toolCalls;
    reporting = true;
    // Progress is advice: a failed append must not disturb the attempt.
    void report({ stage: where.stage, attempt: where.attempt, event: 'activity', toolCalls: c.toolCalls, modelRequests: c.modelRequests })
      .catch(() => undefined)
      .finally(() => (reporting = false));
  };
}
