/**
 * Bree job entry for the evaluator, repair and merger stages (src/workflow/stage-workers.ts names
 * all three in Bree's job list with this file): one worker thread per stage run, which runs the
 * shared agent loop with no tools against the broker socket in its workerData and ends with the
 * run's exit code. Thin on purpose; the logic lives in sandbox/agent-loop.ts (shared with the
 * candidate sandboxes).
 */
import { readFileSync } from 'node:fs';
import { workerData } from 'node:worker_threads';
import type { ChildRequest } from '../src/contracts/broker-protocol.js';
import type { StageRunData } from '../src/contracts/stage-worker-protocol.js';
import { runAgentLoop } from '../sandbox/agent-loop.js';
import { createBrokerClient } from '../sandbox/broker-client.js';

const data = workerData as Partial<StageRunData> | null;
if (typeof data?.requestFile !== 'string' || typeof data.outDir !== 'string' || typeof data.brokerSocket !== 'string') {
  throw new Error('the stage worker needs workerData { requestFile, outDir, brokerSocket } (it is started by Bree, src/workflow/stage-workers.ts)');
}
const request = JSON.parse(readFileSync(data.requestFile, 'utf8')) as ChildRequest;
const outcome = await runAgentLoop({
  request,
  broker: createBrokerClient({ socketPath: data.brokerSocket }),
  // No tools are offered to these roles; the root is never read.
  repoRoot: '/nonexistent',
  outDir: data.outDir,
});
// 0 answered, 3 output cap, 1 failed; a throw (the loop could not write its own output) exits 1.
process.exitCode = outcome.status === 'answered' ? 0 : outcome.status === 'output_cap' ? 3 : 1;
