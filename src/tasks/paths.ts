/**
 * The data directory layout. One `$FUSION_HOME` holds everything a daemon owns, so two homes
 * never share a socket, a database or a task directory.
 */
import { join } from 'node:path';

export interface DataPaths {
  home: string;
  dbFile: string;
  defaultSocket: string;
  tasksDir: string;
  /** Cluster mode: the unpacked repository bundles this daemon ran tasks over, by digest. */
  bundlesDir: string;
}

export function dataPaths(home: string): DataPaths {
  return {
    home,
    dbFile: join(home, 'fusion.db'),
    defaultSocket: join(home, 'fusion.sock'),
    tasksDir: join(home, 'tasks'),
    bundlesDir: join(home, 'bundles'),
  };
}

export interface TaskPaths {
  dir: string;
  inputFile: string;
  budgetFile: string;
  attemptsDir: string;
  resultDir: string;
  answerFile: string;
  metadataFile: string;
}

export function taskPaths(tasksDir: string, taskId: string): TaskPaths {
  const dir = join(tasksDir, taskId);
  const resultDir = join(dir, 'result');
  return {
    dir,
    inputFile: join(dir, 'canonical-input.json'),
    budgetFile: join(dir, 'budget-plan.json'),
    attemptsDir: join(dir, 'attempts'),
    resultDir,
    answerFile: join(resultDir, 'answer.md'),
    metadataFile: join(resultDir, 'metadata.json'),
  };
}

/** `candidate-1.attempt-2`: one directory per stage attempt. */
export function attemptDirName(stage: string, attempt: number): string {
  return `${stage}.attempt-${attempt}`;
}
