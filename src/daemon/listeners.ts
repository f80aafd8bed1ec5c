/**
 * The API the daemon serves: its context (health, metrics, maintenance, research) and its
 * listeners, the Unix socket and, with `listen`, the research API on TCP. Closed first on
 * shutdown, so no request arrives while the layers under it stop.
 */
import type { Server } from 'node:http';
import type { Logger } from '../log.js';
import { FusionError } from '../errors.js';
import type { DaemonConfig } from '../contracts/config.js';
import type { Store } from '../store/port.js';
import type { TaskService } from '../tasks/task-service.js';
import type { Dispatcher } from '../tasks/dispatcher.js';
import { withStorageFacts } from '../tasks/free-space.js';
import type { SigningKey } from '../audit/signing.js';
import type { UnsignedBeforeKey } from '../audit/unsigned-before-key.js';
import { createAttemptRecordCheck, createResultSealCheck } from '../audit/result-seal.js';
import { childImage } from '../launcher/docker-config.js';
import type { MaintenanceJobName, MaintenanceScheduler } from '../maintenance/scheduler.js';
import { createApiHandler, type ApiContext } from '../api/routes.js';
import { closeServer, listenOnSocket, type SocketListenOptions } from '../api/socket-server.js';
import { listenOnTcp, type ListenAddress } from '../api/tcp-listener.js';
import { AuthFailureThrottle } from '../api/auth-throttle.js';
import { createHealthFacts, createMetricsEndpoint } from '../api/metrics.js';
import { packageVersion } from '../common/package-version.js';
import type { DaemonOverrides } from './types.js';
import type { Lifecycle } from './lifecycle.js';
import type { Sandboxes } from './sandboxes.js';
import type { Cluster } from './cluster.js';
import type { ResearchSide } from './research.js';


function withEgressSeams(config: Pick<DaemonConfig, 'egressResolve' | 'egressAllowCidrs'>, health: () => Promise<Record<string, unknown>>): () => Promise<Record<string, unknown>> {
  return async () => ({ ...(await health()), egress: { resolve: config.egressResolve, allowCidrs: config.egressAllowCidrs } });
}

export interface ApiInputs {
  config: DaemonConfig;
  overrides: Pick<DaemonOverrides, 'tcpAuthThrottle'>;
  log: Logger;
  tasks: TaskService;
  store: Store;
  /** The store's facts for /v1/health. */
  databaseFacts: () => Promise<Record<string, unknown>>;
  describeModels: () => unknown;
  dispatcher: Dispatcher;
  cluster: Cluster | undefined;
  sandboxes: Sandboxes;
  signingKey: SigningKey | null;
  /** With the key: the tasks sealed unsigned before it was created, which bg_result still delivers. */
  unsignedBeforeKey: UnsignedBeforeKey | null;
  maintenance: MaintenanceScheduler;
  research: ResearchSide;
  readOnly: boolean;
}

const MAINTENANCE_JOBS: readonly string[] = ['retention', 'reaper', 'stale-sweep', 'backup'] satisfies MaintenanceJobName[];

export function apiContextOf(inputs: ApiInputs): ApiContext {
  const { config, overrides, log, tasks, store, cluster, dispatcher, sandboxes, signingKey, unsignedBeforeKey, maintenance, research, readOnly } = inputs;
  return {
    tasks,
    log,
    version: packageVersion(),
    startedAt: new Date().toISOString(),
    sandbox: async () => {
      try {
        const l = await sandboxes.launcherFor('auto');
        // A backend that works may still have advice for the admin (a stale child image).
        const { warning } = await l.check().catch(() => ({ warning: undefined }));
        return { backend: l.name, ok: true, ...(warning !== undefined ? { warning } : {}) };
      } catch (err) {
        return { ok: false, reason: (err as Error).message };
      }
    },
    // The owner's full health names the admin egress seams: `fusion mcp` compares its own with them (research_run).
    health: withEgressSeams(config, withStorageFacts(config.home, config.storageReserveBytes, readOnly, createHealthFacts({
      database: inputs.databaseFacts,
      providers: inputs.describeModels,
      // Cluster mode: this daemon's runs (the waiting tasks are in the shared queue, not here).
      queue: () => (cluster !== undefined ? { queued: 0, running: cluster.queue.running } : { queued: dispatcher.queued, running: dispatcher.running }),
      image: (backend) => (backend === 'docker' ? childImage() : null),
      sandboxBackend: async () => (await sandboxes.launcherFor('auto').catch(() => undefined))?.name,
    }))),
    metrics: createMetricsEndpoint(store),
    runMaintenance: (job) => {
      if (!MAINTENANCE_JOBS.includes(job)) {
        return Promise.reject(new FusionError('not_found', `no maintenance job ${JSON.stringify(job)}; use retention, reaper, stale-sweep or backup`));
      }
      return maintenance.runNow(job as MaintenanceJobName);
    },
    ...(signingKey ? { resultSeal: createResultSealCheck(store, signingKey.publicKey, unsignedBeforeKey) } : {}),
    attemptCheck: createAttemptRecordCheck(store),
    research: { service: research.service, keys: research.keys },
    tcpAuthThrottle: new AuthFailureThrottle(overrides.tcpAuthThrottle),
  };
}

/** Listens on the socket and, when given, on TCP; each listener is closed by the lifecycle as soon as it listens. */
export async function listen(
  config: DaemonConfig,
  api: ApiContext,
  access: SocketListenOptions,
  tcpAddress: ListenAddress | undefined,
  life: Lifecycle,
): Promise<{ host: string; port: number } | null> {
  const server: Server = await listenOnSocket(config.socketPath, createApiHandler(api, 'socket'), access);
  life.defer('closing the socket listener', () => closeServer(server, config.socketPath));
  if (tcpAddress === undefined) return null;
  const tcp = await listenOnTcp(tcpAddress, createApiHandler(api, 'tcp'));
  life.defer('closing the TCP listener', () => closeServer(tcp.server));
  return { host: tcp.host, port: tcp.port };
}
