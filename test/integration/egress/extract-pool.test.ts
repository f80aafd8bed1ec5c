/**
 * The extraction worker pool: reuse, concurrency, the heap bound, deadline kills, shutdown.
 * Runs the compiled worker from dist/ (the test setup builds it).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ExtractPool } from '../../../src/egress/extract-pool.js';
import type { ExtractInput } from '../../../src/egress/extract.js';
import { FusionError } from '../../../src/errors.js';

const pools: ExtractPool[] = [];

function pool(options: ConstructorParameters<typeof ExtractPool>[0] = {}): ExtractPool {
  const created = new ExtractPool(options);
  pools.push(created);
  return created;
}

function job(html: string, extra: Partial<ExtractInput> = {}): ExtractInput {
  return { body: new Uint8Array(Buffer.from(html)), mediaType: 'text/html', baseUrl: 'https://origin.test/', maxOutputBytes: 32 * 1024, ...extra };
}

function bigPage(bytes: number): string {
  const section = '<section><h2>S</h2><p>Text with <a href="/x">a link</a>.</p><table><tr><td>1</td><td>2</td></tr></table></section>';
  return `<html><body>${section.repeat(Math.ceil(bytes / section.length))}</body></html>`;
}

const never = (): AbortSignal => new AbortController().signal;

afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
});

describe('ExtractPool', () => {
  it('runs the extractor in a worker and reuses it', async () => {
    const p = pool({ size: 2 });
    for (let i = 0; i < 3; i++) {
      const out = await p.run(job(`<h1>T${String(i)}</h1>`), never());
      expect(out).toEqual({ format: 'markdown', content: `# T${String(i)}`, truncated: false });
    }
    expect(p.workerCount).toBe(1);
  });

  it('runs jobs concurrently up to its size and queues the rest', async () => {
    const p = pool({ size: 2 });
    const outs = await Promise.all([1, 2, 3, 4, 5].map((i) => p.run(job(`<p>${String(i)}</p>`), never())));
    expect(outs.map((o) => o.content)).toEqual(['1', '2', '3', '4', '5']);
    expect(p.workerCount).toBe(2);
  });

  it('transfers the body instead of copying it', async () => {
    const input = job('<p>moved</p>');
    await pool().run(input, never());
    expect(input.body.byteLength).toBe(0); // detached: ownership moved to the worker
  });

  it('carries typed extractor errors across the thread boundary', async () => {
    const err = await pool().run(job('x', { body: new Uint8Array([0xff, 0xfe]) }), never()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FusionError);
    expect((err as FusionError).code).toBe('extraction_failed');
  });

  it('enforces the heap bound: an over-budget page fails with extraction_failed and the pool recovers', async () => {
    const p = pool({ size: 1, memoryMb: 32 });
    const err = await p.run(job(bigPage(4 * 1024 * 1024)), never()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FusionError);
    expect((err as FusionError).code).toBe('extraction_failed');
    expect((err as FusionError).details.out_of_memory).toBe(true);
    expect((await p.run(job('<p>after</p>'), never())).content).toBe('after');
  });

  it('kills a worker whose job outlives the deadline and replaces it', async () => {
    const p = pool({ size: 1 });
    await p.run(job('<p>warm</p>'), never());
    const controller = new AbortController();
    const reason = new FusionError('request_timeout', 'deadline');
    // The deadline is the subject: it fires while the worker is busy with the big page.
    setTimeout(() => controller.abort(reason), 50);
    await expect(p.run(job(bigPage(4 * 1024 * 1024)), controller.signal)).rejects.toBe(reason);
    expect(p.workerCount).toBe(0);
    expect((await p.run(job('<p>fresh</p>'), never())).content).toBe('fresh');
  });

  it('rejects at once when the signal already fired, and after close', async () => {
    const controller = new AbortController();
    controller.abort(new Error('gone'));
    await expect(pool().run(job('<p>x</p>'), controller.signal)).rejects.toThrow('gone');
    const p = pool();
    await p.close();
    await expect(p.run(job('<p>x</p>'), never())).rejects.toMatchObject({ code: 'extraction_failed' });
  });

  it('fails cleanly when the worker script is missing', async () => {
    const p = pool({ workerUrl: new URL('file:///nonexistent/extract-worker.js') });
    await expect(p.run(job('<p>x</p>'), never())).rejects.toMatchObject({ code: 'extraction_failed' });
  });
});
