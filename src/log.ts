/**
 * Root pino logger and the field names every component uses.
 *
 * Untrusted text (inputs, pages, model output, child stderr) goes under a key through
 * `untrusted()`, truncated, never as the merge object. Secrets are redacted by path.
 */
import { pino, type Logger, type LoggerOptions, type DestinationStream } from 'pino';

export type { Logger } from 'pino';

export const LOG_FIELDS = {
  component: 'component',
  taskId: 'taskId',
  stage: 'stage',
  attempt: 'attempt',
} as const;

const REDACT_PATHS = [
  'apiKey', '*.apiKey', 'authorization', '*.authorization', 'headers.authorization',
  'headers["x-api-key"]', 'key', '*.key', 'secret', '*.secret', 'token', '*.token',
];

export interface LoggerConfig {
  level?: string;
  destination?: DestinationStream;
}

export function createLogger(config: LoggerConfig = {}): Logger {
  const options: LoggerOptions = {
    level: config.level ?? 'info',
    base: { service: 'fusion' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return config.destination ? pino(options, config.destination) : pino(options, pino.destination(2));
}

/** A logger that drops everything; for tests and library use. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** Truncates untrusted text for a log field (never logged whole, never as the message). */
export function untrusted(text: string, maxChars = 200): string {
  return text.length <= maxChars ? text : `${text.slice(0, maxChars)}…(${text.length} chars)`;
}
