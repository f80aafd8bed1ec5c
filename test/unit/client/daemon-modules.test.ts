/**
 * A project that installed the package without an optional peer (sqlite3, pg, dockerode) gets an
 * invalid_config naming the package and its install command (src/client/daemon-modules.ts), not
 * Node's raw ERR_MODULE_NOT_FOUND. The import failure is simulated through the importer seam.
 */
import { describe, expect, it } from 'vitest';
import { loadDaemonModule } from '../../../src/client/daemon-modules.js';
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

  it('the real import loads', async () => {
    expect(typeof (await loadDaemonModule()).startDaemon).toBe('function');
  });
});
