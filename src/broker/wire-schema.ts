/**
 * Closed zod schemas for the request bodies a child sends the broker
 * (`src/contracts/broker-protocol.ts`). The child is untrusted: every body is checked here before
 * anything reaches a provider or the egress guard, and every issue is reported with its path.
 */
import { z } from 'zod';
import type { FetchRequest, ModelTurnRequest } from '../contracts/broker-protocol.js';

/** Model turn bodies carry the whole conversation; 16 MiB is far above any prompt budget. */
export const MAX_MODEL_BODY_BYTES = 16 * 1024 * 1024;
/** A fetch body is one URL (≤ 8 KiB when declared) and a format. */
export const MAX_FETCH_BODY_BYTES = 64 * 1024;

const toolCallSchema = z.strictObject({
  id: z.string().max(512),
  name: z.string().min(1).max(256),
  arguments: z.string(),
});

const chatMessageSchema = z.strictObject({
  role: z.enum(['system', 'user', 'assistant', 'tool']),
  content: z.string(),
  tool_calls: z.array(toolCallSchema).max(1000).optional(),
  tool_call_id: z.string().max(512).optional(),
  name: z.string().max(256).optional(),
});

const toolSpecSchema = z.strictObject({
  name: z.string().min(1).max(256),
  description: z.string().max(16_384),
  parameters: z.record(z.string(), z.unknown()),
});

export const modelTurnRequestSchema = z.strictObject({
  messages: z.array(chatMessageSchema).min(1),
  tools: z.array(toolSpecSchema).max(64),
  purpose: z.enum(['step', 'compress']).optional(),
});

export const fetchRequestSchema = z.strictObject({
  url: z.string().min(1).max(16_384),
  extract: z.enum(['text', 'markdown']).optional(),
});

// Keep the schemas and the wire types in step: a drift is a compile error.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const _modelTurnMatches: Same<z.infer<typeof modelTurnRequestSchema>, ModelTurnRequest> = true;
const _fetchMatches: Same<z.infer<typeof fetchRequestSchema>, FetchRequest> = true;
void _modelTurnMatches;
void _fetchMatches;

/** `path: message` for every issue, joined by '; '. */
export function describeIssues(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(root)'}: ${issue.message}`).join('; ');
}
