/**
 * A small pool of worker threads that run the extractor (extract.ts) off the daemon's event
 * loop, each with a V8 heap bound (`resourceLimits`). Workers are reused (loading the parser and
 * turndown costs more than most extractions) and unref'd while idle, so an idle pool never
 * keeps the process alive.
 *
 * The caller's signal carries the fetch deadline: time spent queued or extracting counts
 * against it. When it fires mid-extraction the worker is terminated (a pathological page may
 * be stuck in a regex or the parser) and a fresh one is spawned for the next job. A worker that
 * crashes or runs out of its heap fails only its own job, with `extraction_failed`.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { FusionError, isErrorCode } from '../errors.js';
import { DEFAULT_EXTRACT_MEMORY_MB, DEFAULT_EXTRACT_WORKERS } from './constants.js';
import type { ExtractInput, ExtractOutput } from './extract.js';

const YOUNG_GENERATION_MB = 64;

export interface ExtractRequest {
  id: number;
  input: ExtractInput;
}

export type ExtractReply = { id: number; ok: true; output: ExtractOutput } | { id: number; ok: false; code: string; message: string };

export interface ExtractPoolOptions {
  /** Workers kept (default 2); further jobs queue. */
  size?: number;
  /** V8 old-generation bound per worker, in MiB (default 512; the young generation adds 64). */
  memoryMb?: number;
  /** The compiled worker entry; defaults to extract-worker.js next to this module. */
  workerUrl?: URL;
}

/**
 * The compiled worker entry. When this module runs from TypeScript sources (vitest), the worker
 * still has to be JavaScript: use the build output in dist/ (the test setup builds it).
 */
export function defaultExtractWorkerUrl(): URL {
  const here = new URL(import.meta.url);
  if (here.pathname.endsWith('.ts')) {
    const path = fileURLToPath(here).replace(/([\\/])src([\\/])egress([\\/])[^\\/]+\.ts$/u, '$1dist$2src$2egress$3extract-worker.js');
    if (existsSync(path)) return pathToFileURL(path);
  }
  return new URL('./extract-worker.js', here);
}

interface Job {
  id: number;
  input: ExtractInput;
  signal: AbortSignal;
  resolve: (output: ExtractOutput) => void;
  reject: (err: unknown) => void;
  onAbort: () => void;
  slot?: Slot | undefined;
}

interface Slot {
  worker: Worker;
  job: Job | undefined;
}

export class ExtractPool {
  private readonly size: number;
  private readonly memoryMb: number;
  private readonly workerUrl: URL;
  private readonly slots = new Set<Slot>();
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;

  constructor(options: ExtractPoolOptions = {}) {
    this.size = Math.max(1, Math.floor(options.size ?? DEFAULT_EXTRACT_WORKERS));
    this.memoryMb = Math.max(16, Math.floor(options.memoryMb ?? DEFAULT_EXTRACT_MEMORY_MB));
    this.workerUrl = options.workerUrl ?? defaultExtractWorkerUrl();
  }

  /** Workers currently alive (for tests and diagnostics). */
  get workerCount(): number {
    return this.slots.size;
  }

  run(input: ExtractInput, signal: AbortSignal): Promise<ExtractOutput> {
    if (this.closed) return Promise.reject(new FusionError('extraction_failed', 'the extraction pool is closed'));
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    return new Promise<ExtractOutput>((resolve, reject) => {
      const job: Job = { id: this.nextId++, input, signal, resolve, reject, onAbort: () => this.abort(job) };
      signal.addEventListener('abort', job.onAbort, { once: true });
      this.queue.push(job);
      this.pump();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) {
      job.signal.removeEventListener('abort', job.onAbort);
      job.reject(new FusionError('extraction_failed', 'the extraction pool is closed'));
    }
    const slots = [...this.slots];
    this.slots.clear();
    for (const slot of slots) {
      const job = slot.job;
      slot.job = undefined;
      if (job !== undefined) {
        job.signal.removeEventListener('abort', job.onAbort);
        job.reject(new FusionError('extraction_failed', 'the extraction pool is closed'));
      }
    }
    await Promise.all(slots.map((slot) => slot.worker.terminate()));
  }

  private pump(): void {
    while (this.queue.length > 0 && !this.closed) {
      let slot = [...this.slots].find((candidate) => candidate.job === undefined);
      if (slot === undefined) {
        if (this.slots.size >= this.size) return;
        slot = this.spawn();
      }
      const job = this.queue.shift() as Job;
      slot.job = job;
      job.slot = slot;
      slot.worker.ref();
      const body = job.input.body;
      // Transfer (not copy) the body when it owns its whole buffer, as readCappedBody's does.
      const transfer = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength ? [body.buffer as ArrayBuffer] : [];
      slot.worker.postMessage({ id: job.id, input: job.input } satisfies ExtractRequest, transfer);
    }
  }

  private spawn(): Slot {
    const worker = new Worker(this.workerUrl, {
      // No inherited flags (`--input-type`, loaders): the entry is plain compiled JavaScript.
      execArgv: [],
      // V8 sizes a worker's young generation from its old-generation limit, which left the
      // parser (millions of short-lived nodes) scavenging several times more than the main
      // thread; a fixed 64 MiB young generation measured ~9% less CPU per 1 MiB page.
      resourceLimits: { maxOldGenerationSizeMb: this.memoryMb, maxYoungGenerationSizeMb: YOUNG_GENERATION_MB },
    });
    const slot: Slot = { worker, job: undefined };
    worker.unref();
    worker.on('message', (reply: ExtractReply) => this.onReply(slot, reply));
    worker.on('error', (err) => this.onFailure(slot, err));
    worker.on('exit', (code) => this.onFailure(slot, new Error(`extraction worker exited with code ${String(code)}`)));
    this.slots.add(slot);
    return slot;
  }

  private release(slot: Slot, job: Job): void {
    slot.job = undefined;
    job.slot = undefined;
    job.signal.removeEventListener('abort', job.onAbort);
    slot.worker.unref();
  }

  private onReply(slot: Slot, reply: ExtractReply): void {
    const job = slot.job;
    if (job === undefined || reply.id !== job.id) return;
    this.release(slot, job);
    if (reply.ok) job.resolve(reply.output);
    else job.reject(new FusionError(isErrorCode(reply.code) ? reply.code : 'extraction_failed', reply.message));
    this.pump();
  }

  private onFailure(slot: Slot, err: Error): void {
    if (!this.slots.delete(slot)) return;
    const job = slot.job;
    void slot.worker.terminate();
    if (job !== undefined) {
      this.release(slot, job);
      const outOfMemory = (err as { code?: unknown }).code === 'ERR_WORKER_OUT_OF_MEMORY';
      const message = outOfMemory
        ? `content extraction exceeded its ${String(this.memoryMb)} MiB memory bound`
        : `content extraction worker failed: ${err.message}`;
      job.reject(new FusionError('extraction_failed', message, { cause: err, details: { out_of_memory: outOfMemory } }));
    }
    this.pump();
  }

  private abort(job: Job): void {
    const queued = this.queue.indexOf(job);
    if (queued >= 0) this.queue.splice(queued, 1);
    const slot = job.slot;
    if (slot !== undefined) {
      // The worker may be stuck on a pathological page: kill it, the next job gets a fresh one.
      this.slots.delete(slot);
      this.release(slot, job);
      void slot.worker.terminate();
    }
    job.reject(job.signal.reason);
    this.pump();
  }
}
