/**
 * Per-task options a caller may set on submit (closed schema). Unknown keys are rejected so a typo never silently falls back to a default.
 */
import { z } from 'zod';
import { ModelOverridesSchema } from './model-config.js';

export const SANDBOX_CHOICES = ['auto', 'bwrap', 'docker', 'gvisor'] as const;
export type SandboxChoice = (typeof SANDBOX_CHOICES)[number];

export const TaskOptionsSchema = z
  .object({
    sandbox: z.enum(SANDBOX_CHOICES).optional(),
    /** Per-task model overrides: `PROVIDER:MODEL[@BASE_URL]` specs (one or three candidates, evaluator, merger). */
    models: ModelOverridesSchema.optional(),
  })
  .strict();

export type TaskOptions = z.infer<typeof TaskOptionsSchema>;
