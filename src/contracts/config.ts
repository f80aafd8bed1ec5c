/**
 * Daemon configuration (closed, frozen). Built by `main.ts`/`cli/` from flags and environment;
 * invalid configuration is fatal at start-up, never silently defaulted.
 */
import { z } from 'zod';
import { SANDBOX_CHOICES } from './task-options.js';

export const DaemonConfigSchema = z
  .object({
    /** Data directory: database, socket, task directories. Created 0700. */
    home: z.string().min(1),
    /** Unix socket path; default `<home>/fusion.sock`. */
    socketPath: z.string().min(1),
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    /** How many tasks run at once in this process. */
    taskConcurrency: z.number().int().min(1).max(64).default(2),
    /** Admission (docs/behaviour.md#b2): how many accepted tasks may wait for a run slot, in all and per caller. */
    maxQueuedTasks: z.number().int().min(0).max(100_000).default(256),
    maxQueuedPerCaller: z.number().int().min(0).max(100_000).default(256),
    /** Free bytes the data directory's filesystem must keep; below it submits are refused with storage_full. */
    storageReserveBytes: z.number().int().min(0).default(64 * 1024 * 1024),
    sandbox: z.enum(SANDBOX_CHOICES).default('auto'),
    /** Unprivileged uid/gid the sandboxes run as when the daemon is root. */
    sandboxUid: z.number().int().min(1).default(65534),
    sandboxGid: z.number().int().min(1).default(65534),
    /** Model roster file (JSON, see README); absent → the builtin engine. */
    modelsFile: z.string().min(1).optional(),
    /** Admin model overrides (daemon or CLI flags), trusted like the models file. */
    candidateModels: z.array(z.string().min(1)).default([]),
    evaluatorModel: z.string().min(1).optional(),
    mergerModel: z.string().min(1).optional(),
    /** Egress admin seams (SPEC §E, issue 5): `host:ip` overrides and CIDRs treated as public. */
    egressResolve: z.array(z.string()).default([]),
    egressAllowCidrs: z.array(z.string()).default([]),
  })
  .strict();

export type DaemonConfig = z.infer<typeof DaemonConfigSchema>;
export type DaemonConfigInput = z.input<typeof DaemonConfigSchema>;
