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
    /** Unix socket path; default `<home>/fusion.sock` (`/run/fusion/fusion.sock` with socketGroup). */
    socketPath: z.string().min(1),
    /** `--socket-group`: the socket is 0660 for this group (name or gid), whose members are callers (docs/security.md#socket-callers). */
    socketGroup: z.string().min(1).max(64).optional(),
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    /** How many tasks run at once in this process. */
    taskConcurrency: z.number().int().min(1).max(64).default(2),
    /** Admission (docs/behaviour.md#b2): how many accepted tasks may wait for a run slot, in all and per caller. */
    maxQueuedTasks: z.number().int().min(0).max(100_000).default(256),
    maxQueuedPerCaller: z.number().int().min(0).max(100_000).default(256),
    /** Free bytes the data directory's filesystem must keep; below it submits are refused with storage_full. */
    storageReserveBytes: z.number().int().min(0).default(64 * 1024 * 1024),
    /**
     * Keep each attempt's unpacked files and attempt .tar in the task directory, and the task's
     * stage checkpoints in the database, after the task tarball is sealed. Default false: once
     * sealed, the task tarball (in the database) is the one copy, so disk use per task stays bounded
     * unless the admin asks otherwise.
     */
    keepAttemptFiles: z.boolean().default(false),
    sandbox: z.enum(SANDBOX_CHOICES).default('auto'),
    /**
     * `START-END`: the uids (and equal gids) a root daemon leases, one per sandbox
     * (docs/security.md#uid-model); default 2100000000-2100065535.
     */
    sandboxUids: z.string().regex(/^\d{1,10}-\d{1,10}$/, 'must be START-END').default('2100000000-2100065535'),
    /**
     * The admin's opt-in to bwrap's weak rlimit mode on a host without a usable cgroup (memory is
     * not really capped, see docs/security.md#isolation-tiers); without it such a host refuses sandboxes.
     */
    sandboxRlimitFallback: z.boolean().default(false),
    /** Model roster file (JSON, see README); absent → the builtin engine. */
    modelsFile: z.string().min(1).optional(),
    /** Admin model overrides (daemon or CLI flags), trusted like the models file. */
    candidateModels: z.array(z.string().min(1)).default([]),
    evaluatorModel: z.string().min(1).optional(),
    mergerModel: z.string().min(1).optional(),
    /** Egress admin seams (docs/operations.md#egress-admin-seams): `host:ip` overrides and CIDRs treated as public. */
    egressResolve: z.array(z.string()).default([]),
    egressAllowCidrs: z.array(z.string()).default([]),
    /** Opt-in TCP listener for the research API, `HOST:PORT`; loopback unless listenPublic. */
    listen: z.string().min(1).optional(),
    /** Allows a non-loopback `listen` or `dashboard` address (plain HTTP: put TLS in front). */
    listenPublic: z.boolean().default(false),
    /** Opt-in read-only web dashboard, `HOST:PORT`; loopback unless listenPublic (then a workspace key per request). */
    dashboard: z.string().min(1).optional(),
    /** Where research runs live: the durable SQLite file (default) or process memory (lost on restart). */
    researchStore: z.enum(['sqlite', 'memory']).default('sqlite'),
    /** Research database file (runs and API keys); default the data directory's store. Daemons sharing one Redis share this file. */
    researchDb: z.string().min(1).optional(),
    /** User-Agent of research crawls (default FluxusResearchBot). */
    researchUserAgent: z.string().min(1).max(200).regex(/^[\x20-\x7e]+$/, 'must be printable ASCII').optional(),
    /**
     * Cluster mode (docs/operations.md#cluster-mode): the PostgreSQL database every daemon of the
     * cluster shares (tasks, results, artefacts, research runs, API keys). Absent → the SQLite file.
     */
    databaseUrl: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL').optional(),
    /** Redis for the BullMQ research queue; absent → runs execute in the create request. */
    redisUrl: z.string().regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL').optional(),
    researchWorkerConcurrency: z.number().int().min(1).max(64).default(4),
    /**
     * Redis key prefix of the research queue `research-runs` (docs/operations.md#research-queue-name):
     * `bull` (BullMQ's own, so the queue is `bull:research-runs` as tools such as Bull Board
     * expect; the default of a daemon with its own SQLite research database), `cluster`
     * (`fusion-<cluster id>` of the research database, like the task queues; the default in
     * cluster mode, where several clusters may share one Redis), or another prefix of letters,
     * digits, `_` and `-`.
     */
    researchQueuePrefix: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/u, 'must be bull, cluster, or 1–64 letters, digits, _ or -').optional(),
    /** BullMQ lock duration and stalled-job check interval (ms); BullMQ's defaults when absent. */
    researchLockMs: z.number().int().min(500).max(600_000).optional(),
    researchStalledMs: z.number().int().min(500).max(600_000).optional(),
    /**
     * Cluster mode task leases (BullMQ lock duration, renewed at half of it while the task runs)
     * and the stalled-job check interval (ms): a dead daemon's tasks resume elsewhere after about
     * their sum. BullMQ's defaults (30 s each) when absent.
     */
    taskLeaseMs: z.number().int().min(500).max(600_000).optional(),
    taskStalledCheckMs: z.number().int().min(500).max(600_000).optional(),
    /**
     * Cluster mode: how often (ms) each daemon compares the database's unfinished tasks with the
     * queues and re-adds the job of a task that has neither a job nor a live run (Redis lost it).
     */
    queueReconcileMs: z.number().int().min(500).max(3_600_000).default(15_000),
    /**
     * How long (s) a stop (SIGTERM/SIGINT) may take: past it the daemon exits anyway, naming the
     * runs it abandoned (they stay resumable), with exit status 1.
     */
    shutdownTimeoutS: z.number().int().min(1).max(3600).default(30),
    /** Cluster mode: the cap on a task's repository bundle (the packed archive), bytes; default 256 MiB. */
    bundleMaxBytes: z.number().int().min(1024 * 1024).max(1024 * 1024 * 1024).default(256 * 1024 * 1024),
    /** Names this daemon in cluster events; default host name and pid. */
    daemonId: z.string().min(1).max(100).regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces').optional(),
  })
  .strict();

export type DaemonConfig = z.infer<typeof DaemonConfigSchema>;
export type DaemonConfigInput = z.input<typeof DaemonConfigSchema>;
