/**
 * What a stage worker thread (`jobs/stage-worker.ts`) is given as its workerData: the files and
 * broker socket of its one run. It answers with its thread exit code: 0 answered, 3 output cap,
 * 1 failed.
 */
export interface StageRunData {
  requestFile: string;
  outDir: string;
  brokerSocket: string;
}
