/**
 * Composition root: config → logger → adapters → daemon. The only place (with `cli/`) that
 * builds concrete adapters, reads the environment, installs signal handlers or exits. The
 * start-up's parts are in `src/daemon/`, one per concern; each registers how to close what it
 * opened with the daemon's lifecycle, which closes them newest first on a failed start-up and
 * on shutdown.
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLogger, type Logger } from './log.js';
import { FusionError } from './errors.js';
import { DaemonConfigSchema, type DaemonConfig, type DaemonConfigInput } from './contracts/config.js';
import { dataPaths } from './tasks/paths.js';
import { assertNoLiveDaemon } from './api/socket-server.js';
import { assertListenAllowed, parseListenAddress } from './api/tcp-listener.js';
import { loadSigningKey } from './audit/signing.js';
import { loadUnsignedBeforeKey } from './audit/unsigned-before-key.js';
import { Lifecycle } from './daemon/lifecycle.js';
import { ownDataDir, prepareHome } from './daemon/data-dir.js';
import { socketAccess } from './daemon/socket-access.js';
import { openTaskStore } from './daemon/open-store.js';
import { createSandboxes, reapLeftovers } from './daemon/sandboxes.js';
import { loadRosters } from './daemon/roster.js';
import { openEgress, startResearch } from './daemon/research.js';
import { startTaskSide } from './daemon/task-side.js';
import { recoverTasks } from './daemon/recover.js';
import { startSchedulers } from './daemon/schedulers.js';
import { apiContextOf, listen } from './daemon/listeners.js';
import { dashboardAddress, startDashboardListener } from './daemon/dashboard.js';
import { stopWithin } from './daemon/shutdown.js';
import type { Daemon, DaemonOverrides } from './daemon/types.js';

export type { Daemon, DaemonOverrides, ShutdownReport } from './daemon/types.js';
export { RESEARCH_RESTART_MESSAGE } from './daemon/research.js';

/**
 * dist/ root: holds the compiled child code (bound read-only at /opt/fusion) and jobs/. When this
 * module runs from TypeScript sources (tests), the compiled tree next to them is used.
 */
export const CODE_DIR = import.meta.url.endsWith('.ts')
  ? resolve(dirname(fileURLToPath(import.meta.url)), '..', 'dist')
  : resolve(dirname(fileURLToPath(import.meta.url)), '..');


/** The research database file of a configuration: `researchDb`, else the data directory's store. */
export function researchDbFileOf(config: Pick<DaemonConfig, 'home' | 'researchDb'>): string {
  return config.researchDb ?? dataPaths(config.home).dbFile;
}

/**
 * `labelOf` names a field for the message (the CLI passes config/options.ts's, so each bad field
 * is named with the flag or environment variable that set it; library callers see field names).
 */
export function buildConfig(input: DaemonConfigInput, labelOf: (field: string) => string = (field) => field): DaemonConfig {
  const parsed = DaemonConfigSchema.safeParse(input);
  if (!parsed.success) {
    const summary = parsed.error.issues.map((i) => `${i.path.length > 0 ? [labelOf(String(i.path[0])), ...i.path.slice(1).map(String)].join('.') : '(root)'}: ${i.message}`).join('; ');
    throw new FusionError('invalid_config', `configuration is invalid: ${summary}`);
  }
  return Object.freeze(parsed.data);
}

export async function startDaemon(config: DaemonConfig, overrides: DaemonOverrides = {}): Promise<Daemon> {
  const log = overrides.log ?? createLogger({ level: config.logLevel });
  prepareHome(config.home, log);
  const life = new Lifecycle(log);
  return life.start(() => startWithin(life, config, overrides, log));
}

/** The start-up, in order; everything it opens is registered with `life` as soon as it is open. */
async function startWithin(life: Lifecycle, config: DaemonConfig, overrides: DaemonOverrides, log: Logger): Promise<Daemon> {
  const runRoot = await ownDataDir(config, life, overrides.workflow?.runRoot);
  // Before anything is created: a bad --socket-group or --listen is a start-up error naming the flag.
  const access = socketAccess(config, log, overrides.peerCredAddon);
  const tcpAddress = config.listen === undefined ? undefined : parseListenAddress(config.listen);
  if (tcpAddress) assertListenAllowed(tcpAddress, config.listenPublic);
  const dashboardAt = dashboardAddress(config);
  mkdirSync(dataPaths(config.home).tasksDir, { recursive: true, mode: 0o700 });
  // Before anything shared is touched: refuse to run beside a live daemon on the same socket.
  await assertNoLiveDaemon(config.socketPath);
  // A signing key readable by others is a start-up error, not a silent unsigned run.
  const signingKey = loadSigningKey(config.home);
  // With the key, the tasks sealed unsigned before it was created (a list it signed); a list that
  // does not verify is a start-up error too.
  const unsignedBeforeKey = signingKey === null ? null : loadUnsignedBeforeKey(config.home, signingKey.publicKey);
  if (unsignedBeforeKey !== null) log.info({ file: unsignedBeforeKey.file, keyCreatedAt: unsignedBeforeKey.createdAt, tasks: unsignedBeforeKey.tasks.size }, 'tasks sealed unsigned before the signing key stay readable as unsigned');
  const { opened, store, pgStore } = await openTaskStore(config, overrides, log, life);
  const sandboxes = createSandboxes(config, overrides, log);
  const rosters = loadRosters(config, overrides, log);
  const guardedFetch = openEgress(config, log, life);
  const side = await startTaskSide({ config, overrides, log, codeDir: CODE_DIR, runRoot, store, pgStore, signingKey, sandboxes, rosterFor: rosters.rosterFor, guardedFetch }, life);
  const { tasks, cluster } = side;
  let tasksStopped = false;
  life.defer('stopping task runs', async () => {
    await tasks.shutdown();
    tasksStopped = true;
  });
  const researchDbFile = config.databaseUrl !== undefined ? opened.file : researchDbFileOf(config);
  const research = await startResearch({ config, overrides, log, guardedFetch, pgStore, dbFile: researchDbFile }, life);
  const docker = await reapLeftovers(sandboxes, runRoot, overrides, log);
  const { readOnly } = await recoverTasks(config, tasks, cluster, log);
  const maintenance = await startSchedulers({ config, overrides, log, codeDir: CODE_DIR, runRoot, store, pgStore, researchKeys: research.keys, tasks, cluster, snapshotCache: side.snapshotCache, docker, readOnly }, life);
  const api = apiContextOf({
    config, overrides, log, tasks, store, databaseFacts: () => opened.databaseFacts(), describeModels: rosters.describe,
    dispatcher: side.dispatcher, cluster, sandboxes, signingKey, unsignedBeforeKey, maintenance, research, readOnly,
  });
  const tcp = await listen(config, api, access, tcpAddress, life);
  const dashboard = await startDashboardListener({ log, tasks, store, api, research, dispatcher: side.dispatcher, cluster, sandboxes, maintenance, access }, dashboardAt, life);
  log.info({ socket: config.socketPath, home: config.home, pid: process.pid }, 'fusion daemon listening');
  if (tcp) log.info({ host: tcp.host, port: tcp.port }, 'research API listening on TCP (only /api/v1/research and /v1/health)');
  // The dashboard logs its own address when it listens.

  let announced = false;
  const close = (): Promise<void> => {
    if (!announced) log.info({}, 'fusion daemon shutting down');
    announced = true;
    return life.close();
  };
  const stop = stopWithin({ close, life, deadlineS: config.shutdownTimeoutS, tasks, store, research: research.service, tasksStopped: () => tasksStopped, log });
  return {
    config,
    tasks,
    store,
    research: research.service,
    researchDbFile,
    log,
    socketPath: config.socketPath,
    signingKey,
    maintenance,
    tcp,
    dashboard,
    close,
    stop,
  };
}
