/**
 * Docker sandboxes' wall clocks when the daemon is gone. A container does not die with the
 * process that started it (the engine owns it), so each daemon process starts one small keeper
 * process beside it (detached: its own session, it survives a SIGKILLed daemon) and tells it,
 * over a pipe, each container's deadline and when it is gone. While the daemon lives the keeper
 * does nothing: the supervision core's wall clock acts first. When the pipe closes (the daemon
 * exited or died), the keeper force-removes every container it still knows once its deadline has
 * passed, through the engine's HTTP API on its Unix socket, then exits.
 *
 * The keeper is a plain Node script (`KEEPER_SOURCE`, node builtins only) run with `node -e`, so
 * it needs no file of its own on disk and works the same from src/ and dist/.
 *
 * Inside the container the kernel adds a bound of its own (`cpuSecondsCap`, RLIMIT_CPU): a busy
 * child cannot burn more CPU than its wall limit allows even if the keeper is gone too.
 */
import { spawn } from 'node:child_process';
import type { Socket } from 'node:net';

/** Seconds of slack after wall + grace before the keeper removes a container (the daemon acts first). */
export const KEEPER_SLACK_MS = 2_000;

const KEEPER_SOURCE = `
const http = require('node:http');
const socketPath = process.argv[1];
const deadlines = new Map();
let buffer = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buffer += chunk;
  let nl;
  while ((nl = buffer.indexOf('\\n')) >= 0) {
    const line = buffer.slice(0, nl);
    buffer = buffer.slice(nl + 1);
    const [op, id, at] = line.split(' ');
    if (!/^[0-9a-f]{12,64}$/.test(id || '')) continue;
    if (op === '+') deadlines.set(id, Number(at));
    else deadlines.delete(id);
  }
});
const remove = (id) => new Promise((resolve) => {
  const req = http.request({ socketPath, method: 'DELETE', path: '/containers/' + id + '?force=true' }, (res) => { res.resume(); res.on('end', resolve); });
  req.on('error', () => resolve());
  req.setTimeout(30000, () => req.destroy());
  req.end();
});
process.stdin.on('end', () => {
  const pending = [...deadlines].map(([id, at]) => new Promise((resolve) => setTimeout(() => remove(id).then(resolve), Math.max(0, at - Date.now()))));
  Promise.all(pending).then(() => process.exit(0));
});
`;

export interface DeadlineKeeper {
  /** The container must be gone by `deadlineEpochMs` even if this process dies. */
  watch(containerId: string, deadlineEpochMs: number): void;
  /** The container is gone (removed by the daemon): forget it. */
  release(containerId: string): void;
}

const keepers = new Map<string, DeadlineKeeper>();

/** The keeper of this process for one engine socket (started on first use, shared by launchers). */
export function deadlineKeeper(socketPath: string): DeadlineKeeper {
  const existing = keepers.get(socketPath);
  if (existing !== undefined) return existing;
  let stdin: (Socket & NodeJS.WritableStream) | null = null;
  const send = (line: string): void => {
    if (stdin === null) {
      const child = spawn(process.execPath, ['-e', KEEPER_SOURCE, socketPath], { stdio: ['pipe', 'ignore', 'ignore'], detached: true, env: {}, cwd: '/' });
      child.on('error', () => undefined);
      child.unref();
      stdin = child.stdin as unknown as Socket & NodeJS.WritableStream;
      stdin.on('error', () => undefined);
      // Neither the keeper nor its pipe keeps this process alive.
      stdin.unref();
    }
    stdin.write(`${line}\n`);
  };
  const keeper: DeadlineKeeper = {
    watch: (id, at) => send(`+ ${id} ${Math.ceil(at)}`),
    release: (id) => {
      if (stdin !== null) send(`- ${id}`);
    },
  };
  keepers.set(socketPath, keeper);
  return keeper;
}

/** RLIMIT_CPU for a container: never reached while the wall clock is kept (CPU time ≤ wall × CPUs). */
export function cpuSecondsCap(wallMs: number, killGraceMs: number, cpus: number): number {
  return Math.ceil(((wallMs + killGraceMs) / 1000) * Math.max(1, cpus)) + Math.ceil(KEEPER_SLACK_MS / 1000);
}
