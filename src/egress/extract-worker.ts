/**
 * Worker-thread entry of the extraction pool (extract-pool.ts): one message in, one out. Runs
 * the pure extractor with the heap bound the pool set in `resourceLimits`.
 */
import { parentPort } from 'node:worker_threads';
import { isFusionError } from '../errors.js';
import { extractContent } from './extract.js';
import type { ExtractReply, ExtractRequest } from './extract-pool.js';

const port = parentPort;
if (port !== null) {
  port.on('message', (message: ExtractRequest) => {
    let reply: ExtractReply;
    try {
      reply = { id: message.id, ok: true, output: extractContent(message.input) };
    } catch (err) {
      reply = {
        id: message.id,
        ok: false,
        code: isFusionError(err) ? err.code : 'extraction_failed',
        message: err instanceof Error ? err.message : String(err),
      };
    }
    port.postMessage(reply);
  });
}
