/**
 * The daemon's public shapes: what a caller may override at start-up (test seams, the CLI's
 * environment), the running daemon's handle, and the report of a bounded shutdown.
 */
import type { Logger } from '../log.js';
import type { DaemonConfig } from '../contracts/config.js';
import type { Store } from '../store/port.js';
import type { TaskService } from '../tasks/task-service.js';
import type { TaskRunner } from '../tasks/runner-port.js';
import type { LauncherFactories } from '../launcher/select.js';
import type { Roster } from '../models/roster.js';
import type { WorkflowDeps } from '../workflow/stage-context.js';
import type { SigningKey } from '../audit/signing.js';
import type { MaintenanceConfig } from '../maintenance/config.js';
import type { MaintenanceScheduler } from '../maintenance/scheduler.js';
import type { Crawler, CrawlerOptions } from '../research/crawl/port.js';
import type { DocumentBuilder } from '../research/run-executor.js';
import type { QueueDispatchOptions } from '../research/queue-dispatch.js';
import type { ResearchService } from '../research/research-service.js';
import type { AuthThrottleOptions } from '../api/auth-throttle.js';

export interface DaemonOverrides {
  log?: Logger;
  /** Replace the whole workflow (tests drive the lifecycle with a stub runner). */
  runner?: TaskRunner;
  /** A fixed roster for every task (tests); otherwise the models file / flags / builtin default. */
  roster?: Roster;
  /** Environment for model keys and FUSION_MODELS_FILE (the CLI passes process.env). */
  env?: Record<string, string | undefined>;
  launcherFactories?: LauncherFactories;
  /** Extra workflow dependencies (test seams: a wrapping launcher, random bytes, limits). */
  workflow?: Partial<WorkflowDeps>;
  /** Maintenance settings over the environment's (tests use short intervals). */
  maintenance?: Partial<MaintenanceConfig>;
  /** cgroup roots the reaper searches (default /sys/fs/cgroup). */
  cgroupRoots?: string[];
  /** Test seam: builds the research crawler instead of the real one (given the daemon's guard). */
  researchCrawler?: (options: CrawlerOptions) => Crawler;
  /** Test seam: the research document builder to pair with a test crawler. */
  researchDocument?: DocumentBuilder;
  /** Test seams of the research queue (a throwing add, a short add timeout). */
  researchQueue?: Pick<QueueDispatchOptions, 'add' | 'addTimeoutMs'>;
  /** How often an active research run checks for a cancel made through another daemon. */
  researchCancelPollMs?: number;
  /** Test seam: wraps the opened store (the chaos tests stop the process at a chosen write). */
  wrapStore?: <T extends Store>(store: T) => T;
  /** Test seam: the peer-credential addon's path (a missing one proves --socket-group refuses to start). */
  peerCredAddon?: string;
  /** Test seam: the TCP listener's failed-authentication limit (default 20 per address per minute). */
  tcpAuthThrottle?: Partial<AuthThrottleOptions>;
}

export interface Daemon {
  config: DaemonConfig;
  tasks: TaskService;
  store: Store;
  research: ResearchService;
  /** The research store's SQLite file (runs unless --research-store memory, and API keys). */
  researchDbFile: string;
  log: Logger;
  socketPath: string;
  /** The task tarball signing key, when `fusion keys signing-init` created one. */
  signingKey: SigningKey | null;
  maintenance: MaintenanceScheduler;
  /** The TCP listener of the research API, when `listen` is configured. */
  tcp: { host: string; port: number } | null;
  /** The read-only dashboard, when `dashboard` is configured (`url` is its origin). */
  dashboard: { host: string; port: number; url: string } | null;
  close(): Promise<void>;
  /**
   * `close()` bounded by `shutdownTimeoutS` (SIGTERM/SIGINT): a stop ends in time whatever the
   * database, Redis or a sandbox do. Past the deadline it logs what it abandoned and resolves
   * with exit status 1; the abandoned runs stay non-terminal, so they resume elsewhere (expired
   * leases) or at the next start.
   */
  stop(): Promise<ShutdownReport>;
}

export interface ShutdownReport {
  /** 0 after a complete shutdown, 1 when the deadline passed first. */
  exitCode: 0 | 1;
  /** The step the shutdown was in when the deadline passed. */
  stuckAt?: string;
  /** Task runs this daemon had not stopped and handed back by the deadline, with their state when the store answered in time. */
  abandonedTasks: Array<{ taskId: string; state: string }>;
  /** Research runs still under way at the deadline. */
  abandonedResearchRuns: number;
}
