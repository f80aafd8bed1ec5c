/**
 * A task's recorded model usage (tokens per stage and model, and their totals): the shape the
 * workflow commits and the store hands back parsed, checked against this closed schema.
 */
import { z } from 'zod';

const count = z.number().int().nonnegative();

const UsageTotalsSchema = z
  .object({
    requests: count,
    inputTokens: count,
    outputTokens: count,
    /** In the configured price unit; absent when no model of the task has a price. */
    cost: z.number().nonnegative().optional(),
  })
  .strict();

export const UsageEntrySchema = UsageTotalsSchema.extend({ stage: z.string(), model: z.string() }).strict();

export const TaskUsageSchema = z.object({ entries: z.array(UsageEntrySchema), totals: UsageTotalsSchema }).strict();

export type TaskUsage = z.infer<typeof TaskUsageSchema>;
