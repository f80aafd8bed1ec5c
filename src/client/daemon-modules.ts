/**
 * Loading the daemon's modules (an embedded daemon, `fusion daemon`). sqlite3, pg and dockerode
 * are optional peer dependencies of the package, each imported by its adapter when the
 * configuration first needs it (src/contracts/optional-peers.ts names a missing one as its fix);
 * a failure of this import that is still a missing peer is named the same way.
 */
import { peerImportError } from '../contracts/optional-peers.js';
import type * as Main from '../main.js';

export { peerImportError };

type MainModule = typeof Main;

/** Imports src/main.js (`importer`: a seam for tests), a missing optional peer named as its fix. */
export async function loadDaemonModule(importer: () => Promise<MainModule> = () => import('../main.js')): Promise<MainModule> {
  try {
    return await importer();
  } catch (err) {
    throw peerImportError(err);
  }
}
