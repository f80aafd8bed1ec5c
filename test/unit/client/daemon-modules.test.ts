/**
 * A project that installed the package without an optional peer (sqlite3, pg, dockerode) gets an
 * invalid_config naming the package and its install command (src/contracts/optional-peers.ts), not
 * Node's raw ERR_MODULE_NOT_FOUND: from the adapter that imports the peer when the configuration
 * first needs it, and from loading the daemon's modules. The import failure is simulated through
 * the loader seams.
 */
import { describe, expect, it } from 'vitest';
import { loadDaemonModule } from '../../../src/client/daemon-modules.js';
import { importOptionalPeer } from '../../../src/contracts/optional-peers.js';
import { FusionError } from '../../../src/errors.js';

const failing = (message: string, code = 'ERR_MODULE_NOT_FOUND') => async (): Promise<never> => {
  throw Object.assign(new Error(message), { code });
};

async function refusal(importer: () => Promise<never>): Promise<unknown> {
  return loadDaemonModule(importer).then(() => undefined, (err: unknown) => err);
}

describe('loading the daemon without an optional peer', () => {
  it.each([
    ['sqlite3', 'embedded mode and the daemon need sqlite3 (the task database and the data directory lock): npm install sqlite3'],
    ['dockerode', 'the daemon needs dockerode (the Docker sandbox backend): npm install dockerode'],
    ['pg', 'the daemon needs pg (a --database-url / FUSION_DATABASE_URL PostgreSQL database): npm install pg'],
  ])('a missing %s is an invalid_config with its install command', async (peer, message) => {
    const err = await refusal(failing(`Cannot find package '${peer}' imported from /app/node_modules/fusion/dist/src/store/data-dir-lock.js`));
    expect(err).toBeInstanceOf(FusionError);
    expect(err).toMatchObject({ code: 'invalid_config', message, details: { package: peer } });
  });

  it('any other import failure passes through unchanged', async () => {
    const other = await refusal(failing("Cannot find package 'left-pad' imported from /app/x.js"));
    expect(other).not.toBeInstanceOf(FusionError);
    const syntax = await refusal(failing('Unexpected token', 'ERR_SOMETHING'));
    expect((syntax as Error).message).toBe('Unexpected token');
  });

  it.each([
    ['sqlite3', 'src/store/sqlite-db.js', 'embedded mode and the daemon need sqlite3 (the task database and the data directory lock): npm install sqlite3'],
    ['pg', 'src/store/pg-db.js', 'the daemon needs pg (a --database-url / FUSION_DATABASE_URL PostgreSQL database): npm install pg'],
    ['dockerode', 'src/launcher/docker.js', 'the daemon needs dockerode (the Docker sandbox backend): npm install dockerode'],
  ])('an adapter\'s own import of a missing %s is the same invalid_config', async (peer, from, message) => {
    const err = await importOptionalPeer(failing(`Cannot find package '${peer}' imported from /app/node_modules/fusion/dist/${from}`)).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'invalid_config', message, details: { package: peer } });
    expect(await importOptionalPeer(async () => 'loaded')).toBe('loaded');
  });

  it('the real import loads', async () => {
    expect(typeof (await loadDaemonModule()).startDaemon).toBe('function');
  });
});
