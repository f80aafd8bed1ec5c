/**
 * One daemon per data directory (docs/operations.md#one-daemon-per-data-directory): the lock is
 * refused while held (in this process or another, naming the owner), and a SIGKILLed holder
 * never leaves it behind.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readDataDirOwner, takeDataDirLock } from '../../../src/store/data-dir-lock.js';
import { FusionError } from '../../../src/errors.js';

const ROOT = resolve(import.meta.dirname, '..', '..', '..');
const homes: string[] = [];
const freshHome = (): string => {
  const home = mkdtempSync(join(tmpdir(), 'fusion-lock-'));
  homes.push(home);
  return home;
};
afterEach(() => {
  for (const home of homes.splice(0)) rmSync(home, { recursive: true, force: true });
});

/** A separate process that takes the lock, says HELD, and waits to be killed. */
function holder(home: string): Promise<{ pid: number; kill(): Promise<void> }> {
  const script = `import(${JSON.stringify(join(ROOT, 'dist', 'src', 'store', 'data-dir-lock.js'))}).then(async (m) => { await m.takeDataDirLock(${JSON.stringify(home)}, { socket: '/run/other.sock' }); process.stdout.write('HELD\\n'); setInterval(() => {}, 1000); })`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  return new Promise((done, fail) => {
    child.once('exit', (code) => fail(new Error(`the holder exited ${String(code)} before taking the lock`)));
    child.stdout.on('data', (c: Buffer) => {
      if (c.toString().includes('HELD')) done({ pid: child.pid!, kill: () => (child.kill('SIGKILL'), exited) });
    });
  });
}

describe('data directory lock', () => {
  it('refuses a second owner in the same process, naming the first, and is free again once released', async () => {
    const home = freshHome();
    const first = await takeDataDirLock(home, { socket: '/run/first.sock' });
    expect(readDataDirOwner(home)).toMatchObject({ pid: process.pid, socket: '/run/first.sock' });
    const refused = await takeDataDirLock(home, { socket: '/run/second.sock' }).then(() => null, (err: unknown) => err);
    expect(refused).toBeInstanceOf(FusionError);
    expect((refused as FusionError).code).toBe('invalid_config');
    expect((refused as FusionError).message).toContain(`in use by the fusion daemon pid ${process.pid} (socket /run/first.sock`);
    expect((refused as FusionError).message).toMatch(/stop that daemon first, or give this one its own with --data or FUSION_HOME/);
    await first.release();
    expect(readDataDirOwner(home)).toBeNull();
    const again = await takeDataDirLock(home, { socket: '/run/second.sock' });
    await again.release();
  });

  it('refuses while another process holds it, and a SIGKILLed holder leaves nothing that blocks the next start', async () => {
    const home = freshHome();
    const other = await holder(home);
    await expect(takeDataDirLock(home, { socket: '/run/me.sock' })).rejects.toThrow(`in use by the fusion daemon pid ${other.pid} (socket /run/other.sock`);
    await other.kill();
    // Its owner record is still there (nothing ran to remove it): the lock alone decides.
    expect(readDataDirOwner(home)?.pid).toBe(other.pid);
    const mine = await takeDataDirLock(home, { socket: '/run/me.sock' });
    expect(readDataDirOwner(home)).toMatchObject({ pid: process.pid, socket: '/run/me.sock' });
    await mine.release();
  });
});
