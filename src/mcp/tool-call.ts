/**
 * What every `tools/call` handler shares: its result (text for the agent, the structured reply,
 * and whether it is an error), its arguments checked by the tool's own contract (the contracts'
 * exact messages), and the call's signal and progress token.
 */
import type { z } from 'zod';
import { parseWith } from '../api/http-util.js';
import { TOOL_CONTRACTS, type ToolName } from './tool-schemas.js';

export type ToolResult = Record<string, unknown>;

export interface ToolCall {
  /** Aborted by the client's `notifications/cancelled` for this request, or when the session ends. */
  signal: AbortSignal;
  /** The request's `_meta.progressToken`, when it is a string or a number. */
  progressToken?: string | number | undefined;
}

export type ToolHandler = (raw: unknown, call: ToolCall) => Promise<ToolResult>;

export function textResult(text: string, structured: unknown, isError = false): ToolResult {
  return { content: [{ type: 'text', text }], structuredContent: structured, isError };
}

/** The tool's arguments, parsed by its contract (absent arguments are an empty object). */
export function toolArgs<T>(name: ToolName, raw: unknown): T {
  return parseWith(TOOL_CONTRACTS[name] as unknown as z.ZodType<T>, raw ?? {}, `${name} arguments`);
}
