/**
 * Files that are not regular files (docs/behaviour.md#b9): a FIFO, a Unix socket and a device
 * node in the repository are never opened blocking by any tool; each is reported as skipped (or
 * listed with its kind) and the call returns at once. A FIFO with no writer would block an
 * O_RDONLY open forever, so a regression here hangs the test (vitest's timeout fails it).
 */
import { execFileSync } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findTool } from '../../../../sandbox/tools/find.js';
import { grepTool } from '../../../../sandbox/tools/grep.js';
import { lsTool } from '../../../../sandbox/tools/ls.js';
import { openRegularFile } from '../../../../sandbox/tools/open-regular.js';
import { readTool } from '../../../../sandbox/tools/read.js';
import { errorText, makeTempRepo, okText, removeTempRepo } from './helpers.js';

let tmp: string;
let server: net.Server;
const IS_ROOT = process.getuid?.() === 0;

beforeAll(async () => {
  tmp = await makeTempRepo({ 'src/plain.txt': 'needle in a plain file\n' });
  await mkdir(path.join(tmp, 'special'));
  execFileSync('mkfifo', [path.join(tmp, 'special', 'pipe')]);
  execFileSync('mkfifo', [path.join(tmp, 'pipe-at-top')]);
  server = net.createServer().listen(path.join(tmp, 'special', 'sock'));
  // A device node needs root (mknod); the null device is harmless if it ever were read.
  if (IS_ROOT) execFileSync('mknod', [path.join(tmp, 'special', 'dev'), 'c', '1', '3']);
});

afterAll(async () => {
  server.close();
  await removeTempRepo(tmp);
});

describe('special files are never opened blocking', () => {
  it('openRegularFile reports the kind of a FIFO, a socket and a device without opening them', async () => {
    expect(await openRegularFile(path.join(tmp, 'special', 'pipe'))).toEqual({ special: 'FIFO' });
    expect(await openRegularFile(path.join(tmp, 'special', 'sock'))).toEqual({ special: 'socket' });
    if (IS_ROOT) expect(await openRegularFile(path.join(tmp, 'special', 'dev'))).toEqual({ special: 'character device' });
    const opened = await openRegularFile(path.join(tmp, 'src', 'plain.txt'));
    expect(opened.special).toBeUndefined();
    if (opened.special === undefined) await opened.fh.close();
  });

  it('read: a FIFO, a socket or a device is skipped with its kind', async () => {
    expect(errorText(await readTool(tmp, { path: 'special/pipe' }))).toBe('read: special/pipe is not a regular file (FIFO); skipped');
    expect(errorText(await readTool(tmp, { path: 'pipe-at-top' }))).toMatch(/\(FIFO\); skipped$/);
    expect(errorText(await readTool(tmp, { path: 'special/sock' }))).toMatch(/\(socket\); skipped$/);
    if (IS_ROOT) expect(errorText(await readTool(tmp, { path: 'special/dev' }))).toMatch(/\(character device\); skipped$/);
  });

  it('grep: walks past special files, counts them as skipped; a named FIFO is refused', async () => {
    const text = okText(await grepTool(tmp, { pattern: 'needle' }));
    expect(text).toContain('src/plain.txt:1:needle in a plain file');
    expect(text).toMatch(/\[skipped: .*special files \(FIFOs, sockets or devices\)\]/);
    expect(errorText(await grepTool(tmp, { pattern: 'x', path: 'special/pipe' }))).toMatch(/not a regular file or directory \(FIFO\); skipped/);
  });

  it('ls marks them (| FIFO, = socket, % device); find lists them by name; neither opens them', async () => {
    const listing = okText(await lsTool(tmp, { path: 'special' }));
    expect(listing).toContain('pipe|');
    expect(listing).toContain('sock=');
    if (IS_ROOT) expect(listing).toContain('dev%');
    const found = okText(await findTool(tmp, { pattern: 'pipe*' }));
    expect(found).toContain('special/pipe');
  });
});
