/**
 * The package's public entry (`import { FusionClient } from 'fusion-supervisor'`).
 */
export { FusionClient, type FusionClientOptions, type EventsOptions, type ResearchCallOptions } from './fusion-client.js';
export { FusionError, ERROR_CODES, type ErrorCode } from '../errors.js';
export { envelopeError, type ApiReply } from './transport.js';
export type * from './types.js';
