import { spawn, type ChildProcess } from 'node:child_process';
import { tempPath } from '../../helpers/temp-dir.js';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FusionClient } from '../../../src/client/index.js';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export interface DaemonProc {
  home: string;
  socket: string;
  proc: ChildProcess;
  client: FusionClient;
  stderr: () => string;
}

/** A fresh data directory (test/helpers/temp-dir.ts); the caller removes it. */
export function tempHome(prefix = 'fusion-test-'): string {
  return tempPath(prefix);
}

/** Starts the stub-workflow daemon as a real process on a real socket. */
export async function startStubDaemon(home: string, stageMs = 50, answerBytes = 0, config: Record<string, unknown> = {}, env: Record<string, string> = {}): Promise<DaemonProc> {
  const proc = spawn(process.execPath, [join(ROOT, 'test', 'fixtures', 'stub-daemon.mjs'), home, String(stageMs), String(answerBytes)], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env, FUSION_STUB_CONFIG: JSON.stringify(config) },
  });
  let err = '';
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const socket = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`daemon did not start: ${err}`)), 20_000);
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /READY (\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`daemon exited with ${String(code)}: ${err}`));
    });
  });
  return { home, socket, proc, client: new FusionClient(socket), stderr: () => err };
}

export async function stopDaemon(d: DaemonProc, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (d.proc.exitCode !== null) return d.proc.exitCode;
  const exited = new Promise<number | null>((resolve) => d.proc.once('exit', (code) => resolve(code)));
  d.proc.kill(signal);
  return exited;
}

export const INVESTIGATE_ARGS = { objective: ' find risk ', background: [' repo changed '], deliverable: ' report ' };
