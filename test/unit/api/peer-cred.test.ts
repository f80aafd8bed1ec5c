/**
 * The SO_PEERCRED addon (native/peercred): the uid, gid, pid and groups of a connecting child
 * process come from the kernel. As root the child connects as another uid (65534), so the test
 * proves the answer is the peer's, not this process's.
 */
import { spawn } from 'node:child_process';
import { chmodSync, closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadPeerCredReader } from '../../../src/api/peer-cred.js';
import type { CallerIdentity } from '../../../src/tasks/caller.js';

const isRoot = process.getuid?.() === 0;
const dirs: string[] = [];
const servers: Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A listening socket in a 0711 dir (reachable by another uid); resolves the first peer's credentials. */
async function listen(read: (s: Socket) => CallerIdentity): Promise<{ path: string; first: Promise<CallerIdentity> }> {
  const dir = mkdtempSync(join(tmpdir(), 'fusion-peercred-'));
  dirs.push(dir);
  const path = join(dir, 's.sock');
  let resolveFirst!: (c: CallerIdentity) => void;
  let rejectFirst!: (e: Error) => void;
  const first = new Promise<CallerIdentity>((res, rej) => ((resolveFirst = res), (rejectFirst = rej)));
  const server = createServer((socket) => {
    try {
      resolveFirst(read(socket));
    } catch (err) {
      rejectFirst(err as Error);
    }
    socket.destroy();
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(path, r));
  chmodSync(dir, 0o711);
  chmodSync(path, 0o777);
  return { path, first };
}

/** A child that connects to `path` and waits until the server hangs up. */
function connectChild(path: string, ids: { uid?: number; gid?: number } = {}): { pid: number; exited: Promise<number | null> } {
  const script = `const s=require('node:net').connect(${JSON.stringify(path)});s.on('close',()=>process.exit(0));s.on('error',()=>process.exit(3));`;
  const child = spawn(process.execPath, ['-e', script], { stdio: 'ignore', ...ids });
  return { pid: child.pid!, exited: new Promise((r) => child.once('exit', (code) => r(code))) };
}

describe('peer credentials addon', () => {
  const loaded = loadPeerCredReader();
  it('loads from its fixed path in the package (make build builds it)', () => {
    expect(loaded).toHaveProperty('read');
  });

  it('names a connecting child: its uid, gid and pid', async () => {
    if (!('read' in loaded)) throw new Error(loaded.error);
    const { path, first } = await listen(loaded.read);
    const child = connectChild(path);
    const cred = await first;
    expect(cred).toMatchObject({ uid: process.getuid!(), gid: process.getgid!(), pid: child.pid });
    expect(Array.isArray(cred.groups) || cred.groups === null).toBe(true);
    expect(await child.exited).toBe(0);
  });

  it.runIf(isRoot)('names a child of another uid as that uid (as root)', async () => {
    if (!('read' in loaded)) throw new Error(loaded.error);
    const { path, first } = await listen(loaded.read);
    const child = connectChild(path, { uid: 65534, gid: 65534 });
    // libuv drops supplementary groups when it changes the uid.
    expect(await first).toEqual({ uid: 65534, gid: 65534, pid: child.pid, groups: [] });
    expect(await child.exited).toBe(0);
  });

  it('refuses a descriptor that is not a socket, and a missing addon says why', () => {
    if (!('read' in loaded)) throw new Error(loaded.error);
    const fd = openSync('/dev/null', 'r');
    try {
      expect(() => loaded.read({ _handle: { fd } } as unknown as Socket)).toThrow(/SO_PEERCRED.*non-socket/);
    } finally {
      closeSync(fd);
    }
    const missing = loadPeerCredReader('/nonexistent/peercred.node');
    expect('error' in missing && missing.error).toMatch(/cannot load \/nonexistent\/peercred\.node.*make build/);
  });
});
