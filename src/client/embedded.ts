/**
 * An in-process daemon for a client that found none on its socket (zero set-up for a first
 * task). Loaded lazily so a plain socket client does not pull the daemon's modules in.
 */
import type { DaemonConfigInput } from '../contracts/config.js';
import { loadDaemonModule } from './daemon-modules.js';

export interface EmbeddedDaemon {
  socketPath: string;
  close(): Promise<void>;
}

/**
 * Starts a daemon with `input` (the caller's settings: socket, data directory, seams). It logs
 * to stderr at `warn` unless `input.logLevel` says otherwise: stdout may carry a protocol (MCP).
 * `env` supplies model keys and the models file, as for `fusion daemon`.
 */
export async function startEmbeddedDaemon(input: DaemonConfigInput, env: Record<string, string | undefined>): Promise<EmbeddedDaemon> {
  const [{ buildConfig, startDaemon }, { createLogger }] = await Promise.all([loadDaemonModule(), import('../log.js')]);
  const config = buildConfig({ ...input, logLevel: input.logLevel ?? 'warn' });
  const daemon = await startDaemon(config, { log: createLogger({ level: config.logLevel }), env });
  return { socketPath: daemon.socketPath, close: () => daemon.close() };
}
