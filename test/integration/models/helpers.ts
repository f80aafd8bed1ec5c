/** Shared bits of the model adapter tests: a captured pino logger, the sentinel key, settings. */
import type { Logger } from '../../../src/log.js';
import { createLogger } from '../../../src/log.js';
import type { RemoteModelSettings } from '../../../src/models/remote-provider.js';
import type { ModelRequest } from '../../../src/models/port.js';
import type { ToolSpec } from '../../../src/contracts/broker-protocol.js';

/** A key that must never appear in any error, log line, description or output. */
export const SENTINEL_KEY = 'sk-SENTINEL-9f8e7d6c5b4a39281706f5e4d3c2b1a0';

export interface CapturedLog {
  log: Logger;
  text(): string;
}

export function capturedLogger(level = 'trace'): CapturedLog {
  let buffer = '';
  const log = createLogger({ level, destination: { write: (line: string) => void (buffer += line) } });
  return { log, text: () => buffer };
}

export function settings(baseUrl: string, extra: Partial<RemoteModelSettings> = {}): RemoteModelSettings {
  return {
    model: 'fake-model',
    baseUrl,
    timeoutMs: 5_000,
    maxAttempts: 4,
    prices: {},
    retry: { baseDelayMs: 20, maxDelayMs: 50, maxRetryAfterMs: 5_000 },
    ...extra,
  };
}

export const LS_TOOL: ToolSpec = {
  name: 'ls',
  description: 'List a directory.',
  parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
};

export const READ_TOOL: ToolSpec = {
  name: 'read',
  description: 'Read a file.',
  parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
};

export function request(extra: Partial<ModelRequest> = {}): ModelRequest {
  return {
    role: 'candidate',
    taskId: 'investigate-test',
    messages: [
      { role: 'system', content: 'You are a careful investigator.' },
      { role: 'user', content: 'Where is main defined?' },
    ],
    tools: [LS_TOOL, READ_TOOL],
    ...extra,
  };
}

export async function rejectionOf(p: Promise<unknown>): Promise<Error & { code?: string; details?: Record<string, unknown>; retryable?: boolean }> {
  try {
    await p;
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('expected a rejection');
}
