/**
 * Compatibility path for code written before the client library moved to src/client/ (branches
 * merged later may still import it). New code imports '../client/index.js'.
 */
export { FusionClient, envelopeError, type ApiReply } from '../client/index.js';
