/**
 * Socket API bodies and replies (closed schemas). The receipt text is docs/behaviour.md#f1, word for word.
 */
import { z } from 'zod';
import { TaskOptionsSchema } from './task-options.js';
import type { Workflow } from './constants.js';

export const SubmitBodySchema = z
  .object({
    /** The tool's JSON arguments, validated by the tool-input contract (exact docs/behaviour.md#a messages). */
    arguments: z.unknown(),
    /** Absolute path of the repository to investigate. */
    repo: z.string().trim().min(1, 'repo must be an absolute directory path'),
    options: TaskOptionsSchema.optional(),
  })
  .strict();
export type SubmitBody = z.infer<typeof SubmitBodySchema>;

export const DELIVERY_MODES = ['auto', 'inline', 'artifact'] as const;
export type DeliveryMode = (typeof DELIVERY_MODES)[number];

export interface Receipt {
  taskId: string;
  workflow: Workflow;
  state: string;
  createdAt: string;
  requestSha256: string;
  canonicalInputSha256: string;
  /** docs/behaviour.md#f1 lines for agents. */
  text: string;
}

export function receiptText(workflow: Workflow, taskId: string): string {
  return [
    `Started fusion ${workflow} in the background (${taskId}).`,
    'The workflow passed durable preflight and no longer blocks this tool call.',
    `Wait for the terminal notification, then call bg_result({taskId:"${taskId}"}). Do not poll.`,
  ].join('\n');
}

/** docs/behaviour.md#f2 terminal notification. */
export interface TerminalNotification {
  taskId: string;
  name: string;
  status: 'completed' | 'failed' | 'cancelled';
  error: { code: string; message: string; state: string } | null;
  summary: string;
}
