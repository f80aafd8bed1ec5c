/**
 * Bree job entry for the evaluator, repair and merger stages: a worker thread that runs the
 * shared agent loop with no tools against its own broker socket. Thin on purpose; the logic
 * lives in sandbox/agent-loop.ts (shared with the candidate sandboxes).
 */
import { readFileSync } from 'node:fs';
import { workerData } from 'node:worker_threads';
import type { ChildRequest } from '../src/contracts/broker-protocol.js';
import { runAgentLoop } from '../sandbox/agent-loop.js';
import { createBrokerClient } from '../sandbox/broker-client.js';

interface StageWorkerData {
  requestFile: string;
  outDir: string;
  brokerSocket: string;
}

const data = (workerData as { requestFile?: string } & Partial<StageWorkerData>) as StageWorkerData;
const request = JSON.parse(readFileSync(data.requestFile, 'utf8')) as ChildRequest;
const outcome = await runAgentLoop({
  request,
  broker: createBrokerClient({ socketPath: data.brokerSocket }),
  // No tools are offered to these roles; the root is never read.
  repoRoot: '/nonexistent',
  outDir: data.outDir,
});
process.exitCode = outcome.status === 'answered' ? 0 : outcome.status === 'output_cap' ? 3 : 1;
