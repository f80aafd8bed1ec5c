/**
 * Which model tool calls a child refuses before anything runs, and the exact error text the
 * model gets back. Pure, so the child (which refuses) and the supervisor's replay (which checks
 * that every call logged as rejected really had to be, with exactly this text) share one rule.
 */
import type { ToolCall } from './broker-protocol.js';

/** Undefined when the call may run: a tool of this stage with JSON-object (or empty) arguments. */
export function rejectionOf(call: Pick<ToolCall, 'name' | 'arguments'>, tools: readonly string[]): string | undefined {
  const shown = JSON.stringify(call.name.slice(0, 100));
  if (!tools.includes(call.name)) {
    return `tool ${shown} does not exist here and was not run; available tools: ${tools.length > 0 ? tools.join(', ') : 'none'}. Call one of those, or write your final answer.`;
  }
  // Some models send "" for a call without arguments (e.g. `ls`).
  if (call.arguments.trim() === '') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(call.arguments);
  } catch {
    return `${call.name} was not run: its arguments must be a JSON object, and they are not valid JSON. Call it again with a JSON object.`;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return `${call.name} was not run: its arguments must be a JSON object. Call it again with a JSON object.`;
  return undefined;
}
