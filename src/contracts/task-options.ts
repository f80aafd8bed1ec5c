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
    /**
     * `.gitignore`-style patterns of repository paths left out of the task's repository snapshot
     * (docs/behaviour.md#repository-bundles). Absent → `.git/` and the secrets rule
     * (DEFAULT_REPO_EXCLUDES); a list replaces that default (`[]` packs those too). The
     * checkout's own `.gitignore` files apply either way; `!pattern` here re-includes.
     */
    repoExclude: z
      .array(z.string().min(1, 'repoExclude patterns must not be empty').max(4096, 'a repoExclude pattern is at most 4096 characters').refine((p) => !p.includes('\0'), 'repoExclude patterns must not contain NUL'))
      .max(256, 'repoExclude takes at most 256 patterns')
      .optional(),
  })
  .strict();

export type TaskOptions = z.infer<typeof TaskOptionsSchema>;
