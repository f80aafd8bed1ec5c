/**
 * A daemon with --socket-group refuses to start rather than trust callers it cannot tell apart
 * (docs/security.md#socket-callers): an unknown group, or the peer-credential addon missing, is
 * a start-up error naming the flag, and no socket is created.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { buildConfig, startDaemon } from '../../../src/main.js';
import { silentLogger } from '../../../src/log.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup(socketGroup: string): { config: ReturnType<typeof buildConfig>; socket: string } {
  const base = mkdtempSync(join(tmpdir(), 'fusion-sockgroup-daemon-'));
  dirs.push(base);
  const socket = join(base, 'run', 'fusion.sock');
  return { config: buildConfig({ home: join(base, 'home'), socketPath: socket, socketGroup, logLevel: 'silent' }), socket };
}

describe('fusion daemon --socket-group', () => {
  it('refuses an unknown group, naming the flag', async () => {
    const { config, socket } = setup('no-such-group-fusion-test');
    await expect(startDaemon(config, { log: silentLogger() })).rejects.toMatchObject({ code: 'invalid_config', message: expect.stringMatching(/^--socket-group: no group "no-such-group-fusion-test"/) });
    expect(existsSync(socket)).toBe(false);
  });

  it('refuses to start without the peer-credential addon (no silent fallback to trusting every member)', async () => {
    const { config, socket } = setup('root');
    await expect(startDaemon(config, { log: silentLogger(), peerCredAddon: '/nonexistent/peercred.node' })).rejects.toMatchObject({
      code: 'invalid_config',
      message: expect.stringMatching(/^--socket-group root needs the peer-credential addon .* cannot load \/nonexistent\/peercred\.node/),
    });
    expect(existsSync(socket)).toBe(false);
  });
});
