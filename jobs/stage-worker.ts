/**
 * Worker thread entry for the evaluator, repair and merger stages: it runs the shared agent loop
 * with no tools against the broker socket each run names. The thread is pooled (see
 * src/workflow/stage-workers.ts): it answers one `run` message at a time and stays for the next.
 * Thin on purpose; the logic lives in sandbox/agent-loop.ts (shared with the candidate sandboxes).
 */
import { readFileSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';
import type { ChildRequest } from '../src/contracts/broker-protocol.js';
import type { StageDoneMessage, StageRunMessage } from '../src/contracts/stage-worker-protocol.js';
import { runAgentLoop } from '../sandbox/agent-loop.js';
import { createBrokerClient } from '../sandbox/broker-client.js';

if (parentPort === null) throw new Error('the stage worker runs only as a worker thread');
const port = parentPort;

async function runStage(msg: StageRunMessage): Promise<number> {
  const request = JSON.parse(readFileSync(msg.data.requestFile, 'utf8')) as ChildRequest;
  const outcome = await runAgentLoop({
    request,
    broker: createBrokerClient({ socketPath: msg.data.brokerSocket }),
    // No tools are offered to these roles; the root is never read.
    repoRoot: '/nonexistent',
    outDir: msg.data.outDir,
  });
  return outcome.status === 'answered' ? 0 : outcome.status === 'output_cap' ? 3 : 1;
}

port.on('message', (msg: StageRunMessage) => {
  // The loop throws only when it cannot write its own output: that run failed, the thread is fine.
  void runStage(msg).then(
    (exitCode) => port.postMessage({ type: 'done', id: msg.id, exitCode } satisfies StageDoneMessage),
    () => port.postMessage({ type: 'done', id: msg.id, exitCode: 1 } satisfies StageDoneMessage),
  );
});
