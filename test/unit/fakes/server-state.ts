/** Waiting on a server's state in unit tests of the socket and TCP listeners (no fixed sleeps). */
import type { Server } from 'node:net';
import { waitFor as waitForState } from '../../helpers/wait.js';

/** The server's open connection count. */
export async function connections(server: Server): Promise<number> {
  return new Promise((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
}

/** Polls `check` every 10 ms until it holds; throws after `timeoutMs` (test/helpers/wait.ts). */
export async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs = 5_000): Promise<void> {
  await waitForState('the server state', check, timeoutMs, 10);
}
