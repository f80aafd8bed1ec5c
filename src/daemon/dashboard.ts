/**
 * The opt-in read-only dashboard (`--dashboard HOST:PORT`, docs/operations.md#dashboard): its
 * address is checked before anything is created (loopback, or a non-loopback one with
 * `--listen-public`, where every request needs a workspace key), and once the API context exists
 * it listens, reading through the same services the socket API uses. Closed with the listeners.
 */
import type { Logger } from '../log.js';
import { FusionError } from '../errors.js';
import type { DaemonConfig } from '../contracts/config.js';
import type { Store } from '../store/port.js';
import type { TaskService } from '../tasks/task-service.js';
import type { Dispatcher } from '../tasks/dispatcher.js';
import type { MaintenanceScheduler } from '../maintenance/scheduler.js';
import type { ApiContext } from '../api/routes.js';
import type { SocketListenOptions } from '../api/socket-server.js';
import { closeServer } from '../api/socket-server.js';
import { isLoopbackHost, parseListenAddress, type ListenAddress } from '../api/tcp-listener.js';
import { createDashboardData } from '../dashboard/data.js';
import { startDashboard } from '../dashboard/server.js';
import { passwdNames, ViewerRules } from '../dashboard/viewers.js';
import type { Lifecycle } from './lifecycle.js';
import type { Sandboxes } from './sandboxes.js';
import type { Cluster } from './cluster.js';
import type { ResearchSide } from './research.js';

/** The dashboard's address, or undefined when it is off; a bad one is a start-up error naming the flag. */
export function dashboardAddress(config: Pick<DaemonConfig, 'dashboard' | 'listenPublic'>): ListenAddress | undefined {
  if (config.dashboard === undefined) return undefined;
  let address: ListenAddress;
  try {
    address = parseListenAddress(config.dashboard);
  } catch (err) {
    throw new FusionError('invalid_config', `--dashboard must be HOST:PORT (e.g. 127.0.0.1:8788 or [::1]:8788), got ${JSON.stringify(config.dashboard)}`, { details: { field: 'dashboard' }, cause: err });
  }
  if (!isLoopbackHost(address.host) && !config.listenPublic) {
    throw new FusionError(
      'invalid_config',
      `refusing to serve the dashboard on ${address.host}: off loopback the daemon cannot tell which local user is asking, so every request would need a workspace API key, sent in clear text over plain HTTP. ` +
        'Use a loopback address (e.g. 127.0.0.1:8788), or put a TLS proxy in front and add --listen-public.',
      { details: { field: 'dashboard' } },
    );
  }
  return address;
}

export interface DashboardInputs {
  log: Logger;
  tasks: TaskService;
  store: Store;
  api: ApiContext;
  research: ResearchSide;
  dispatcher: Dispatcher;
  cluster: Cluster | undefined;
  sandboxes: Sandboxes;
  maintenance: MaintenanceScheduler;
  access: SocketListenOptions;
}

export async function startDashboardListener(inputs: DashboardInputs, address: ListenAddress | undefined, life: Lifecycle): Promise<{ host: string; port: number; url: string } | null> {
  if (address === undefined) return null;
  const { log, tasks, store, api, research, dispatcher, cluster, sandboxes, maintenance } = inputs;
  const data = createDashboardData({
    tasks,
    store,
    resultChecks: { ...(api.resultSeal ? { sealCheck: api.resultSeal } : {}), ...(api.attemptCheck ? { attemptCheck: api.attemptCheck } : {}) },
    researchRuns: research.service.store,
    keys: research.keys,
    queue: () => (cluster !== undefined ? { queued: 0, running: cluster.queue.running } : { queued: dispatcher.queued, running: dispatcher.running }),
    sandboxBackend: async () => (await sandboxes.launcherFor('auto').catch(() => undefined))?.name,
    maintenanceRuns: () => maintenance.recentRuns(),
  });
  const dashboard = await startDashboard({
    address,
    data,
    rules: new ViewerRules(api.daemonUid ?? process.getuid?.() ?? 0, inputs.access.group?.gid),
    userName: passwdNames(),
    keys: research.keys,
    log: log.child({ component: 'dashboard' }),
  });
  life.defer('closing the dashboard', () => closeServer(dashboard.server));
  return { host: dashboard.host, port: dashboard.port, url: dashboard.url };
}
