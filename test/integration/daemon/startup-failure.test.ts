/**
 * A start-up that fails part way leaves nothing open (src/daemon/lifecycle.ts): a listener that
 * cannot bind or a restart recovery that throws closes the store, the research side, the stage
 * workers, the egress guard and the listeners already up, removes the run root and the socket,
 * and releases the data-directory lock, so a second start in the same process succeeds and the
 * process holds no more handles or timers than before.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { buildConfig, startDaemon, type DaemonOverrides } from '../../../src/main.js';
import { silentLogger } from '../../../src/log.js';
import type { Store } from '../../../src/store/port.js';
import type { DaemonConfigInput } from '../../../src/contracts/config.js';

const dirs: string[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** The active handles and timers of this process, counted by kind. */
function resources(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const kind of process.getActiveResourcesInfo()) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return counts;
}

/** Kinds of which the process holds more now than in `before`. */
function grown(before: Map<string, number>): Record<string, number> {
  const more: Record<string, number> = {};
  for (const [kind, n] of resources()) if (n > (before.get(kind) ?? 0)) more[kind] = n - (before.get(kind) ?? 0);
  return more;
}

/** A store whose close is observed and whose restart recovery throws when asked. */
function observedStore(failRecovery: boolean): { closed: () => boolean; wrapStore: NonNullable<DaemonOverrides['wrapStore']> } {
  let closed = false;
  const wrapStore = <T extends Store>(store: T): T =>
    new Proxy(store, {
      get(target, key) {
        if (key === 'close') return async () => {
          closed = true;
          await target.close();
        };
        if (key === 'listNonTerminalTasks' && failRecovery) return () => Promise.reject(new Error('recovery broke'));
        const value = Reflect.get(target, key, target) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  return { closed: () => closed, wrapStore };
}

function setup(extra: Partial<DaemonConfigInput> = {}): { home: string; socket: string; runRoot: string; config: ReturnType<typeof buildConfig> } {
  const base = mkdtempSync(join(tmpdir(), 'fusion-startfail-'));
  dirs.push(base);
  const home = join(base, 'home');
  const socket = join(base, 'fusion.sock');
  return { home, socket, runRoot: join(base, 'run'), config: buildConfig({ home, socketPath: socket, logLevel: 'silent', ...extra }) };
}

const runner = { run: () => Promise.reject(new Error('no task runs in these tests')) };

/** A loopback TCP port something else already listens on. */
async function takenPort(): Promise<number> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as { port: number }).port;
}

/** Starts and stops a daemon on the same data directory: the lock and the socket path are free again. */
async function startsAgain(config: ReturnType<typeof buildConfig>, runRoot: string): Promise<void> {
  const again = await startDaemon(buildConfig({ home: config.home, socketPath: config.socketPath, logLevel: 'silent' }), { log: silentLogger(), runner, workflow: { runRoot } });
  expect(existsSync(config.socketPath)).toBe(true);
  await again.close();
}

describe('a failed start-up leaves nothing open', () => {
  it('a daemon that starts and stops leaves no handle or timer behind (the baseline the failures are held to)', async () => {
    const { config, runRoot } = setup();
    const before = resources();
    const daemon = await startDaemon(config, { log: silentLogger(), runner, workflow: { runRoot } });
    await daemon.close();
    expect(grown(before)).toEqual({});
    expect(existsSync(runRoot)).toBe(false);
  }, 60_000);

  it('a TCP listen that fails (port in use) closes the socket listener and everything under it', async () => {
    const port = await takenPort();
    const { config, socket, runRoot } = setup({ listen: `127.0.0.1:${port}` });
    const observed = observedStore(false);
    const before = resources();
    await expect(startDaemon(config, { log: silentLogger(), runner, workflow: { runRoot }, wrapStore: observed.wrapStore })).rejects.toThrow(/EADDRINUSE|in use/);
    expect(observed.closed()).toBe(true);
    expect(existsSync(socket)).toBe(false);
    expect(existsSync(runRoot)).toBe(false);
    expect(grown(before)).toEqual({});
    await startsAgain(config, runRoot);
  }, 60_000);

  it('a restart recovery that throws closes the store, the research side and the run root, and frees the data directory', async () => {
    const { config, socket, runRoot } = setup();
    const observed = observedStore(true);
    const before = resources();
    await expect(startDaemon(config, { log: silentLogger(), runner, workflow: { runRoot }, wrapStore: observed.wrapStore })).rejects.toThrow('recovery broke');
    expect(observed.closed()).toBe(true);
    expect(existsSync(socket)).toBe(false);
    expect(existsSync(runRoot)).toBe(false);
    expect(grown(before)).toEqual({});
    await startsAgain(config, runRoot);
  }, 60_000);
});
