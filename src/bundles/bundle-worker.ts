/**
 * The CPU-heavy bundle work, run in a worker thread (off-thread.ts) so the daemon's event loop
 * keeps serving while it runs: a cap-sized archive of tiny entries takes seconds to read
 * strictly and to write out, and the main thread must answer receipts and health meanwhile
 * (docs/operations.md#repository-snapshots). One long-lived worker serves every request
 * (`{ id, op }` messages; a worker per operation would add its start-up to every run):
 *
 * - `pack`: packTree in-process (root, the daemon's uid): the archive, its digest and what was skipped;
 * - `verify`: the strict read of an untrusted archive (a packing child's output): its entry count and sha256;
 * - `unpack`: digest check, strict read, and the tree written into a fresh `.partial-*`
 *   directory under `dir` (root-owned, directories 0755, files 0644 or 0755), flushed to disk
 *   (syncfs) unless the caller flushes it itself; the caller renames it into place.
 *
 * The reply is `{ id, ok: true, … }` or `{ id, ok: false, error: { code, message, details } }`.
 */
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parentPort } from 'node:worker_threads';
import { FusionError, toFusionError } from '../errors.js';
import { readBundleTar } from './bundle-tar.js';
import { packTree } from './pack.js';

export const PARTIAL_PREFIX = '.partial-';

export type WorkerOp =
  | { op: 'pack'; root: string; exclude: readonly string[]; maxBytes: number }
  | { op: 'verify'; data: Uint8Array; maxBytes: number; maxEntries: number }
  | { op: 'unpack'; data: Uint8Array; digest: string; dir: string; maxBytes: number; maxEntries: number; syncfs: boolean };

function unpack(data: Buffer, digest: string, dir: string, limits: { maxBytes: number; maxEntries: number }, syncfs: boolean): { entries: number; partial: string } {
  const actual = createHash('sha256').update(data).digest('hex');
  if (actual !== digest) {
    throw new FusionError('bundle_changed', `the repository bundle's bytes changed since it was packed (sha256 ${actual.slice(0, 16)}…, recorded ${digest.slice(0, 16)}…); nothing ran. Submit the task again`, {
      details: { digest, actual },
    });
  }
  const entries = readBundleTar(data, limits);
  const tmp = mkdtempSync(join(dir, PARTIAL_PREFIX));
  try {
    chmodSync(tmp, 0o755);
    for (const e of entries) {
      const path = join(tmp, e.path);
      if (e.type === 'dir') {
        mkdirSync(path, { mode: 0o755 });
        chmodSync(path, 0o755);
      } else if (e.type === 'file') {
        const mode = e.executable ? 0o755 : 0o644;
        writeFileSync(path, e.data, { mode, flag: 'wx' });
        chmodSync(path, mode);
      } else {
        symlinkSync(e.target, path);
      }
    }
    // syncfs(2) of the tree's filesystem through coreutils' `sync -f` (one call however many
    // files), here: the spawn of a large process stalls the thread that makes it.
    if (syncfs) execFileSync('sync', ['-f', tmp], { timeout: 600_000, stdio: 'ignore' });
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  return { entries: entries.length, partial: tmp };
}

async function perform(op: WorkerOp): Promise<{ reply: Record<string, unknown>; transfer: ArrayBuffer[] }> {
  if (op.op === 'pack') {
    const packed = await packTree(op.root, { exclude: op.exclude, maxBytes: op.maxBytes });
    const data = new Uint8Array(packed.data.buffer, packed.data.byteOffset, packed.data.byteLength);
    // Moved, not copied, when the archive owns its whole buffer (a large one always does).
    const whole = data.byteOffset === 0 && data.byteLength === data.buffer.byteLength && data.buffer instanceof ArrayBuffer;
    return { reply: { digest: packed.digest, data, entries: packed.entries, files: packed.files, skipped: packed.skipped }, transfer: whole ? [data.buffer as ArrayBuffer] : [] };
  }
  const data = Buffer.from(op.data.buffer, op.data.byteOffset, op.data.byteLength);
  // The bytes go back to the caller (moved, as they came), who still needs them.
  const back = { data: op.data };
  const transfer = op.data.buffer instanceof ArrayBuffer ? [op.data.buffer] : [];
  if (op.op === 'verify') {
    const entries = readBundleTar(data, op);
    return { reply: { entries: entries.length, files: entries.filter((e) => e.type === 'file').length, digest: createHash('sha256').update(data).digest('hex'), ...back }, transfer };
  }
  return { reply: { ...unpack(data, op.digest, op.dir, op, op.syncfs), ...back }, transfer };
}

if (parentPort !== null) {
  const port = parentPort;
  port.on('message', ({ id, op }: { id: number; op: WorkerOp }) => {
    perform(op).then(
      ({ reply, transfer }) => port.postMessage({ id, ok: true, ...reply }, transfer),
      (err: unknown) => {
        const fe = toFusionError(err);
        port.postMessage({ id, ok: false, error: { code: fe.code, message: fe.message, details: fe.details ?? {} } });
      },
    );
  });
}
