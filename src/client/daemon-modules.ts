/**
 * Loading the daemon's modules (an embedded daemon, `fusion daemon`). sqlite3, pg and dockerode
 * are optional peer dependencies of the package: a project that installed it without them gets,
 * instead of Node's raw ERR_MODULE_NOT_FOUND from deep inside the store or a launcher, an
 * `invalid_config` naming the package, what needs it and the command that installs it.
 */
import { FusionError } from '../errors.js';
import type * as Main from '../main.js';

type MainModule = typeof Main;

/** What each optional peer is for, as the fix message says it. */
const PEERS: Readonly<Record<string, string>> = {
  sqlite3: 'embedded mode and the daemon need sqlite3 (the task database and the data directory lock)',
  dockerode: 'the daemon needs dockerode (the Docker sandbox backend)',
  pg: 'the daemon needs pg (a --database-url / FUSION_DATABASE_URL PostgreSQL database)',
};

/** The optional peer a failed import is missing, if that is why it failed. */
function missingPeer(err: unknown): string | undefined {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (e?.code !== 'ERR_MODULE_NOT_FOUND' || typeof e.message !== 'string') return undefined;
  // "Cannot find package 'sqlite3' imported from …"
  const name = /Cannot find (?:package|module) '([^']+)'/u.exec(e.message)?.[1];
  return name !== undefined && Object.hasOwn(PEERS, name) ? name : undefined;
}

/** `err` as the fix for a missing optional peer, or `err` itself. */
export function peerImportError(err: unknown): unknown {
  const peer = missingPeer(err);
  if (peer === undefined) return err;
  return new FusionError('invalid_config', `${PEERS[peer]}: npm install ${peer}`, { cause: err, details: { package: peer } });
}

/** Imports src/main.js (`importer`: a seam for tests), a missing optional peer named as its fix. */
export async function loadDaemonModule(importer: () => Promise<MainModule> = () => import('../main.js')): Promise<MainModule> {
  try {
    return await importer();
  } catch (err) {
    throw peerImportError(err);
  }
}
