/**
 * Bree job entry for every maintenance job: the schedule lives in Bree, the work in the main
 * thread (it needs the daemon's database connection and its set of running tasks). The worker
 * asks for its job to run and stays alive until the main thread says it finished, so Bree never
 * starts the same job twice at once.
 */
import { parentPort, workerData } from 'node:worker_threads';

const job = (workerData as { job?: unknown } | null)?.job;
if (parentPort === null || typeof job !== 'string') throw new Error('maintenance tick needs a parent port and a job name');
const port = parentPort;
port.once('message', () => {
  port.close();
});
port.postMessage({ run: job });
