/**
 * One error class for the whole daemon, over the code registry of src/common/error-codes.ts
 * (which the sandbox child shares: add a code there, and its README row).
 */
import { ERROR_CODES, type ErrorCode } from './common/error-codes.js';

export { ERROR_CODES, type ErrorCode, type ErrorCodeInfo } from './common/error-codes.js';

export interface FusionErrorOptions {
  stage?: string;
  retryable?: boolean;
  details?: Record<string, unknown>;
  cause?: unknown;
}

export class FusionError extends Error {
  readonly code: ErrorCode;
  readonly stage: string | undefined;
  readonly retryable: boolean;
  readonly details: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, options: FusionErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'FusionError';
    this.code = code;
    this.stage = options.stage;
    this.retryable = options.retryable ?? ERROR_CODES[code].retryable;
    this.details = options.details ?? {};
  }

  get httpStatus(): number {
    return ERROR_CODES[this.code].httpStatus;
  }

  /** The wire envelope `{"error":{"code","message","details"}}`. */
  toEnvelope(): { error: { code: ErrorCode; message: string; details: Record<string, unknown> } } {
    const details = this.stage === undefined ? this.details : { stage: this.stage, ...this.details };
    return { error: { code: this.code, message: this.message, details } };
  }
}

export function isFusionError(value: unknown): value is FusionError {
  return value instanceof FusionError;
}

export function isErrorCode(value: string): value is ErrorCode {
  return Object.prototype.hasOwnProperty.call(ERROR_CODES, value);
}

/** Wraps anything thrown into a FusionError without losing the original as `cause`. */
export function toFusionError(err: unknown, fallback: ErrorCode = 'internal_error', stage?: string): FusionError {
  if (err instanceof FusionError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new FusionError(fallback, message, { cause: err, ...(stage === undefined ? {} : { stage }) });
}
