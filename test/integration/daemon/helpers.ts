import { tempPath } from '../../helpers/temp-dir.js';
import { ROOT } from '../../helpers/gates.js';
import { startFixtureDaemon, type Started } from '../../helpers/cli.js';
import { waitFor } from '../../helpers/wait.js';
import { join } from 'node:path';
import { FusionClient } from '../../../src/client/index.js';

export { ROOT } from '../../helpers/gates.js';

export interface DaemonProc {
  home: string;
  socket: string;
  /** The daemon process, its output kept (test/helpers/cli.ts). */
  started: Started;
  proc: Started['proc'];
  client: FusionClient;
  stdout: () => string;
  stderr: () => string;
}

/** A fresh data directory (test/helpers/temp-dir.ts); the caller removes it. */
export function tempHome(prefix = 'fusion-test-'): string {
  return tempPath(prefix);
}

/** Starts the stub-workflow daemon as a real process on a real socket. */
export async function startStubDaemon(home: string, stageMs = 50, answerBytes = 0, config: Record<string, unknown> = {}, env: Record<string, string> = {}): Promise<DaemonProc> {
  const { started, socket } = await startFixtureDaemon(join(ROOT, 'test', 'fixtures', 'stub-daemon.mjs'), [home, String(stageMs), String(answerBytes)], {
    env: { ...env, FUSION_STUB_CONFIG: JSON.stringify(config) },
  });
  return { home, socket, started, proc: started.proc, client: new FusionClient(socket), stdout: started.stdout, stderr: started.stderr };
}

/** Stops the daemon with `signal` (SIGKILL after 30 s); resolves with its exit code (null when a signal ended it). */
export async function stopDaemon(d: DaemonProc, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  return (await d.started.stop(signal, 30_000)).code;
}

/**
 * Polls the task (GET /v1/tasks/:id) until `done(task)` holds and returns it; fails after
 * `timeoutMs` naming `what` and the task's last state.
 */
export async function waitForTask(client: Pick<FusionClient, 'call'>, taskId: string, what: string, done: (task: Record<string, any>) => boolean, timeoutMs = 30_000): Promise<Record<string, any>> {
  let last: Record<string, any> | undefined;
  try {
    return await waitFor(`task ${taskId} ${what}`, async () => {
      last = (await client.call('GET', `/v1/tasks/${taskId}`)) as Record<string, any>;
      return done(last) ? last : false;
    }, timeoutMs, 50);
  } catch (err) {
    throw new Error(`${(err as Error).message} (last state ${String(last?.state)})`, { cause: err });
  }
}

/**
 * A task past initializing and queued: it has started running (its repository snapshot is
 * packed). Only a task that ran counts a resume after a restart (docs/behaviour.md#b13).
 */
export const STARTED_RUNNING = (task: Record<string, any>): boolean => task.state !== 'initializing' && task.state !== 'queued';

export const INVESTIGATE_ARGS = { objective: ' find risk ', background: [' repo changed '], deliverable: ' report ' };
