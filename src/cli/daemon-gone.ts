/**
 * Honest waiting: when the daemon goes away under `fusion wait` or `--wait`, the task
 * has not failed. Say what happened and what to do (exit 3), never "task failed" (exit 1).
 */
import { FusionError } from '../errors.js';
import { pathError } from './path-errors.js';

const CONNECTION_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'ENOENT', 'EPIPE', 'ECONNABORTED']);
/** The system calls of a socket conversation; an error from any other (open, mkdir…) is about a file. */
const SOCKET_SYSCALLS = new Set(['connect', 'read', 'write', 'writev', 'shutdown']);

/**
 * A transport failure talking to the daemon (it stopped, crashed or its socket is gone). An
 * ENOENT from opening a file (a missing --input) is not one: only a failed connect is.
 */
export function isConnectionLoss(err: unknown): boolean {
  if (err instanceof FusionError) return err.code === 'daemon_unavailable';
  const e = err as { code?: unknown; message?: unknown; syscall?: unknown } | null;
  if (typeof e?.syscall === 'string' && !SOCKET_SYSCALLS.has(e.syscall)) return false;
  return (typeof e?.code === 'string' && CONNECTION_CODES.has(e.code)) || (typeof e?.message === 'string' && /socket hang up|aborted/i.test(e.message));
}

/** The error `fusion wait`/`--wait` end with when the daemon went away while waiting for `taskId`. */
export function daemonWentAway(taskId: string, socketPath: string, cause: unknown): FusionError {
  return new FusionError(
    'daemon_unavailable',
    `the daemon on ${socketPath} went away while waiting for task ${taskId}; the task has not failed: a daemon started on the same data directory resumes it ('fusion daemon'), then 'fusion wait ${taskId}' follows it again, or 'fusion cancel ${taskId}' drops it`,
    { cause, details: { taskId } },
  );
}

/** Runs `fn`, turning a lost daemon into `daemonWentAway`. */
export async function whileWaiting<T>(taskId: string, socketPath: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isConnectionLoss(err)) throw daemonWentAway(taskId, socketPath, err);
    throw err;
  }
}

/** Ends the process quietly when stdout's reader went away (`fusion status … | head`). */
export function quietOnEpipe(stream: NodeJS.WriteStream): void {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0);
    throw err;
  });
}

/** What the CLI prints for an error that escaped a command: transport and path errors named plainly. */
export function cliErrorOf(err: unknown): FusionError {
  if (err instanceof FusionError) return err;
  const e = err as NodeJS.ErrnoException & { address?: string };
  const where = e.address ?? e.path;
  if (where !== undefined && (e.code === 'ENOTDIR' || e.code === 'EACCES' || e.code === 'EPERM')) {
    const problem = e.code === 'ENOTDIR' ? 'a part of the path is a file, not a directory' : 'permission denied';
    return new FusionError('invalid_input', `${where}: ${problem}; check --data / --socket (or FUSION_HOME / FUSION_SOCKET)`, { cause: err, details: { path: where } });
  }
  // Any other file the command opened: its path and what is wrong with it, never a bare errno.
  if (e.path !== undefined && e.address === undefined) {
    const named = pathError(err, e.path, 'path', /mkdir|write|rename|link|copyfile/u.test(e.syscall ?? '') ? 'write' : 'read');
    if (named instanceof FusionError) return named;
  }
  if (isConnectionLoss(err)) return new FusionError('daemon_unavailable', `the connection to the daemon was lost (${e.code ?? e.message}); is it still running? ('fusion daemon' starts one)`, { cause: err });
  return new FusionError('internal_error', e.message ?? String(err), { cause: err });
}
