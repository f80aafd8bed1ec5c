/**
 * Runs one bundle operation (bundle-worker.ts) in a worker thread and returns its reply, so the
 * daemon's event loop is never blocked by a strict read, an unpack or an in-process pack
 * (docs/operations.md#repository-snapshots). A FusionError of the worker comes back as the same
 * code, message and details; a worker that dies without replying is an internal_error.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { FusionError, type ErrorCode } from '../errors.js';
import type { PackedBundle } from './pack.js';
import { sanitiseSkipReport } from './pack.js';
import type { WorkerOp } from './bundle-worker.js';

/** A compiled module of this folder (under vitest this module is TypeScript: use the build in dist/). */
export function compiledBundleModule(file: string): string {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith('.ts')) {
    const built = here.replace(/([\\/])src([\\/])bundles([\\/])[^\\/]+\.ts$/u, `$1dist$2src$2bundles$3${file}`);
    if (existsSync(built)) return built;
  }
  return fileURLToPath(new URL(`./${file}`, import.meta.url));
}

type Reply = { id: number; ok: boolean; error?: { code: string; message: string; details: Record<string, unknown> } } & Record<string, unknown>;

/** The one bundle worker, started on first use and unref'd (it never keeps the daemon alive). */
let shared: { worker: Worker; pending: Map<number, { resolve: (r: Record<string, unknown>) => void; reject: (e: Error) => void }> } | undefined;
let nextId = 0;

function bundleWorker(): NonNullable<typeof shared> {
  if (shared !== undefined) return shared;
  const worker = new Worker(compiledBundleModule('bundle-worker.js'));
  worker.unref();
  const self = { worker, pending: new Map<number, { resolve: (r: Record<string, unknown>) => void; reject: (e: Error) => void }>() };
  const failAll = (err: Error): void => {
    if (shared === self) shared = undefined;
    for (const p of self.pending.values()) p.reject(err);
    self.pending.clear();
  };
  worker.on('message', (msg: Reply) => {
    const p = self.pending.get(msg.id);
    if (p === undefined) return;
    self.pending.delete(msg.id);
    if (msg.ok) p.resolve(msg);
    else p.reject(new FusionError((msg.error?.code ?? 'internal_error') as ErrorCode, msg.error?.message ?? 'bundle worker failed', { details: msg.error?.details ?? {} }));
  });
  worker.on('error', (err) => failAll(new FusionError('internal_error', `the bundle worker failed: ${err.message}`, { cause: err })));
  worker.on('exit', (code) => failAll(new FusionError('internal_error', `the bundle worker exited with code ${code}`)));
  shared = self;
  return self;
}

function runWorker(op: WorkerOp, transfer: ArrayBuffer[] = []): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const w = bundleWorker();
    const id = ++nextId;
    // Held (ref'd) while a request is in flight, so a caller awaiting it is not left behind.
    w.worker.ref();
    const done = (): void => {
      if (w.pending.size === 0) w.worker.unref();
    };
    w.pending.set(id, { resolve: (r) => (resolve(r), done()), reject: (e) => (reject(e), done()) });
    w.worker.postMessage({ id, op }, transfer);
  });
}

/**
 * A Buffer's bytes as a transferable Uint8Array: the Buffer's own memory when it owns a whole
 * ArrayBuffer (a large archive always does; moving it costs nothing, where a copy of a cap-sized
 * archive would itself stall the loop), else a copy (a small, pooled Buffer). The worker sends
 * the bytes back with its reply; the Buffer passed in must not be used after the call.
 */
function transferable(data: Buffer): { view: Uint8Array; transfer: ArrayBuffer[] } {
  if (data.byteOffset === 0 && data.byteLength === data.buffer.byteLength && data.buffer instanceof ArrayBuffer) {
    return { view: new Uint8Array(data.buffer, 0, data.byteLength), transfer: [data.buffer] };
  }
  const view = new Uint8Array(data.byteLength);
  view.set(data);
  return { view, transfer: [view.buffer] };
}

const asBuffer = (v: unknown): Buffer => {
  const u = v as Uint8Array;
  return Buffer.from(u.buffer, u.byteOffset, u.byteLength);
};

/** packTree of `root` in a worker thread (the in-process packer: root, the daemon's uid). */
export async function packOffThread(root: string, options: { exclude: readonly string[]; maxBytes: number }): Promise<PackedBundle> {
  const r = await runWorker({ op: 'pack', root, exclude: options.exclude, maxBytes: options.maxBytes });
  const data = r.data as Uint8Array;
  return { digest: r.digest as string, data: Buffer.from(data.buffer, data.byteOffset, data.byteLength), entries: r.entries as number, files: r.files as number, skipped: sanitiseSkipReport(r.skipped) };
}

/**
 * The strict read of an untrusted archive in a worker thread: its entry and regular-file counts, its
 * sha256 and the bytes (moved back: use them, not `data`), or bundle_changed.
 */
export async function verifyOffThread(data: Buffer, limits: { maxBytes: number; maxEntries: number }): Promise<{ entries: number; files: number; digest: string; data: Buffer }> {
  const { view, transfer } = transferable(data);
  const r = await runWorker({ op: 'verify', data: view, ...limits }, transfer);
  return { entries: r.entries as number, files: r.files as number, digest: r.digest as string, data: asBuffer(r.data) };
}

/** Digest check, strict read, unpack into a fresh `.partial-*` directory of `dir` and (syncfs) its flush, in a worker thread (`data` is moved: not usable after). */
export async function unpackOffThread(data: Buffer, digest: string, dir: string, limits: { maxBytes: number; maxEntries: number }, syncfs: boolean): Promise<{ entries: number; partial: string }> {
  const { view, transfer } = transferable(data);
  const r = await runWorker({ op: 'unpack', data: view, digest, dir, ...limits, syncfs }, transfer);
  return { entries: r.entries as number, partial: r.partial as string };
}
