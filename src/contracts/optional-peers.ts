/**
 * The package's optional peer dependencies (package.json `peerDependenciesMeta`): sqlite3, pg and
 * dockerode. Each is imported only where it is used, when it is first used (docs/architecture.md#optional-peers),
 * so a daemon loads only the drivers its configuration chose. A project that installed the package
 * without one gets, instead of Node's raw ERR_MODULE_NOT_FOUND from deep inside an adapter, an
 * `invalid_config` naming the package, what needs it and the command that installs it.
 */
import { FusionError } from '../errors.js';

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

/** Runs an adapter's own `import('peer')`, a missing optional peer named as its fix. */
export async function importOptionalPeer<T>(load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (err) {
    throw peerImportError(err);
  }
}
