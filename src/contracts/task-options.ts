/**
 * Per-task options a caller may set on submit (closed schema). Model overrides arrive with the
 * providers issue; unknown keys are rejected so a typo never silently falls back to a default.
 */
import { z } from 'zod';

export const SANDBOX_CHOICES = ['auto', 'bwrap', 'docker'] as const;
export type SandboxChoice = (typeof SANDBOX_CHOICES)[number];

export const TaskOptionsSchema = z
  .object({
    sandbox: z.enum(SANDBOX_CHOICES).optional(),
  })
  .strict();

export type TaskOptions = z.infer<typeof TaskOptionsSchema>;
