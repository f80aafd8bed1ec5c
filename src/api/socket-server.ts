/**
 * HTTP/1.1 over a Unix socket created with mode 0600. The socket is bound under a 0177 umask so
 * there is no window in which another user could connect, then chmod'ed explicitly as well.
 * A stale socket file (nothing answering) is replaced; a live one is an error.
 */
import { createServer, type RequestListener, type Server } from 'node:http';
import { connect } from 'node:net';
import { chmodSync, lstatSync, unlinkSync } from 'node:fs';
import { FusionError } from '../errors.js';
import { STRICT_SERVER_OPTIONS, installClientErrorEnvelope } from './request-guard.js';

function socketAnswers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Throws when another daemon already answers on `path` (checked before start-up touches shared state). */
export async function assertNoLiveDaemon(path: string): Promise<void> {
  if (await socketAnswers(path)) throw new FusionError('invalid_config', `another daemon already answers on ${path}; stop it or choose another --socket/--data`);
}

export async function listenOnSocket(path: string, handler: RequestListener): Promise<Server> {
  let exists = false;
  try {
    const st = lstatSync(path);
    if (!st.isSocket()) throw new FusionError('invalid_config', `socket path ${path} exists and is not a socket; remove it or choose another --socket`);
    exists = true;
  } catch (err) {
    if (err instanceof FusionError) throw err;
  }
  if (exists) {
    if (await socketAnswers(path)) throw new FusionError('invalid_config', `another daemon already answers on ${path}; stop it or choose another --socket/--data`);
    unlinkSync(path);
  }
  const server = createServer(STRICT_SERVER_OPTIONS, handler);
  installClientErrorEnvelope(server);
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    const previous = process.umask(0o177);
    try {
      // A flood of clients connecting at once must wait in the backlog, not fail with EAGAIN
      // (Node's default is 511; the kernel caps it at net.core.somaxconn).
      server.listen({ path, backlog: 4096 }, () => {
        server.off('error', reject);
        resolve();
      });
    } finally {
      process.umask(previous);
    }
  });
  chmodSync(path, 0o600);
  return server;
}

/** One closeServer for the API and the broker (src/http/http-util.ts). */
export { closeServer } from '../http/http-util.js';
