/**
 * A log capture shared by the e2e suites: a real `Logger` writing JSON lines into memory, and a
 * reader that parses them back.
 */
import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../../src/log.js';

export interface LogCapture {
  log: Logger;
  lines: () => Array<Record<string, unknown>>;
}

export function captureLogs(level = 'debug'): LogCapture {
  const raw: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      raw.push(...chunk.toString('utf8').split('\n').filter((l) => l !== ''));
      callback();
    },
  });
  return {
    log: createLogger({ level, destination }),
    lines: () => raw.map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
