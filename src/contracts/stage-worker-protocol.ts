/**
 * Messages between the daemon and a pooled stage worker thread (`jobs/stage-worker.ts`). A worker
 * lives across stage runs (a fresh worker thread per stage left native memory behind),
 * so each run is one `run` message answered by one `done` message with the same id.
 */
export interface StageRunData {
  requestFile: string;
  outDir: string;
  brokerSocket: string;
}

export interface StageRunMessage {
  type: 'run';
  id: number;
  data: StageRunData;
}

/** exitCode: 0 answered, 3 output cap, 1 failed (the codes a one-shot worker exited with). */
export interface StageDoneMessage {
  type: 'done';
  id: number;
  exitCode: number;
}
