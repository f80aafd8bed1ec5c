/**
 * `fusion mcp` as a child process for the MCP integration tests: its replies, read line by
 * line, and `next(match)` for the first reply (already seen or still to come) that matches.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { ROOT } from '../daemon/helpers.js';

export function startMcp(socket: string, env: Record<string, string> = {}): { proc: ChildProcess; next: (match: (m: any) => boolean) => Promise<any>; stderr: () => string } {
  const proc = spawn(process.execPath, [join(ROOT, 'dist', 'src', 'cli', 'main.js'), 'mcp', '--socket', socket, '--repo', ROOT], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const messages: any[] = [];
  const waiters: Array<{ match: (m: any) => boolean; resolve: (m: any) => void }> = [];
  let err = '';
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  createInterface({ input: proc.stdout! }).on('line', (l) => {
    const m = JSON.parse(l);
    messages.push(m);
    for (const w of [...waiters]) if (w.match(m)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(m);
    }
  });
  const next = (match: (m: any) => boolean): Promise<any> => {
    const found = messages.find(match);
    return found ? Promise.resolve(found) : new Promise((resolve) => waiters.push({ match, resolve }));
  };
  return { proc, next, stderr: () => err };
}
