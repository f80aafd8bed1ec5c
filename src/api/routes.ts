/**
 * The socket API. Every reply is JSON (or NDJSON for event streams); every error is the one
 * envelope `{"error":{"code","message","details"}}`.
 *
 *   GET  /v1/health
 *   GET  /metrics                        Prometheus text
 *   POST /v1/tasks/investigate          {arguments, repo, options?} → 202 receipt
 *   POST /v1/tasks/research             {arguments, repo, options?} → 202 receipt
 *   GET  /v1/tasks[?state=&limit=]      list
 *   GET  /v1/tasks/:id                  status
 *   GET  /v1/tasks/:id/result[?delivery=auto|inline|artifact]   bg_result (never blocks)
 *   GET  /v1/tasks/:id/answer                                    the verified answer's bytes (text/markdown)
 *   GET  /v1/tasks/:id/wait[?timeoutMs=]                         long-poll until terminal
 *   GET  /v1/tasks/:id/events[?after=&follow=]                   NDJSON events
 *   GET  /v1/events[?follow=]                                     NDJSON events of all tasks
 *   POST /v1/tasks/:id/cancel
 *   POST /v1/admin/maintenance/:job    retention | reaper | stale-sweep | backup, run now
 *   /api/v1/research…                   research runs (see research-routes.ts; bearer key required)
 *
 * Surfaces: the Unix socket (0600 for the daemon's user, or 0660 for the --socket-group) serves
 * everything. The TCP listener serves ONLY the research API and a minimal health: the task API
 * authenticates callers by their kernel-reported uid (SO_PEERCRED), which only a Unix socket
 * has, so it must never be reachable over the network.
 *
 * Callers (docs/security.md#socket-callers): root and the daemon's uid see every task; any other
 * uid sees only the tasks it submitted, and a task it may not see answers exactly like a task
 * that does not exist. Metrics and maintenance are theirs alone (forbidden to others).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import { SubmitBodySchema, DELIVERY_MODES, type DeliveryMode } from '../contracts/api.js';
import { allowedMethodsText, matchRoute, type RouteName } from '../contracts/routes.js';
import type { ResultChecks, TaskService } from '../tasks/task-service.js';
import { isTaskState, isTerminal, statusOf } from '../contracts/task-state.js';
import { noSuchTask } from '../tasks/task-service.js';
import { isPrivileged, maySeeTask, uidLabel, type CallerIdentity } from '../tasks/caller.js';
import { socketCaller } from './socket-server.js';
import type { AttemptRecordCheck, ResultSealCheck } from '../tasks/result-reader.js';
import type { TaskEvent, TaskRecord } from '../store/port.js';
import { parseWith, readJsonBody, sendError, sendJson } from './http-util.js';
import { ownedEventsFilter } from './owned-events.js';
import { routeResearch, type ResearchApiContext } from './research-routes.js';
import { assertStrictRequest } from './request-guard.js';
import { AuthFailureThrottle } from './auth-throttle.js';

export interface ApiContext {
  tasks: TaskService;
  log: Logger;
  version: string;
  startedAt: string;
  sandbox: () => Promise<Record<string, unknown>>;
  /** More health facts (database, providers, queue depth…), merged into `GET /v1/health`. */
  health?: () => Promise<Record<string, unknown>>;
  /** `GET /metrics`: Prometheus text exposition. */
  metrics?: () => Promise<{ contentType: string; body: string }>;
  /** With a signing key: the signed task tarball check bg_result runs before delivery. */
  resultSeal?: ResultSealCheck;
  /** bg_result's check of a result's attempts against the sealed task tarball. */
  attemptCheck?: AttemptRecordCheck;
  /** `POST /v1/admin/maintenance/{job}`: runs one maintenance job now (admin make targets). */
  runMaintenance?: (job: string) => Promise<unknown>;
  /** The research-run API; absent → its routes answer not_found. */
  research?: ResearchApiContext;
  /** The daemon's uid, privileged like root (default process.getuid()). */
  daemonUid?: number;
  /** Failed-authentication limit of the TCP surface (default: AuthFailureThrottle's defaults). */
  tcpAuthThrottle?: AuthFailureThrottle;
}

export type ApiSurface = 'socket' | 'tcp';

const MAX_WAIT_MS = 10 * 60_000;

export function taskView(task: TaskRecord): Record<string, unknown> {
  return {
    taskId: task.id,
    workflow: task.workflow,
    state: task.state,
    status: statusOf(task.state),
    repo: task.repoDir,
    createdAt: task.createdAt,
    updatedAt: task.updatedAt,
    error: task.error,
    resumeCount: task.resumeCount,
    callerUid: task.callerUid,
    objective: objectiveOf(task.canonicalInput),
    usage: task.usage,
  };
}

/** The task's objective (from its canonical input's request text), for lists a person reads; null when unreadable. */
export function objectiveOf(canonicalInput: string): string | null {
  try {
    const text = (JSON.parse(canonicalInput) as { request?: { text?: unknown } }).request?.text;
    const objective = typeof text === 'string' ? (JSON.parse(text) as { objective?: unknown }).objective : undefined;
    return typeof objective === 'string' ? objective : null;
  } catch {
    return null;
  }
}

function intParam(url: URL, name: string, fallback: number, max: number): number {
  const raw = url.searchParams.get(name);
  if (raw === null) return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0) throw new FusionError('invalid_input', `query parameter ${name} must be a non-negative integer, got ${JSON.stringify(raw)}`, { details: { field: name } });
  return Math.min(n, max);
}

export function createApiHandler(ctx: ApiContext, surface: ApiSurface = 'socket'): (req: IncomingMessage, res: ServerResponse) => void {
  const log = ctx.log.child({ component: 'api', surface });
  // Only the TCP surface is throttled: a socket caller is a local uid the kernel named.
  const throttle = surface === 'tcp' ? (ctx.tcpAuthThrottle ?? new AuthFailureThrottle()) : undefined;
  const handle = surface === 'socket' ? route : (c: ApiContext, req: IncomingMessage, res: ServerResponse) => routeTcp(c, req, res, throttle);
  return (req, res) => {
    const started = Date.now();
    Promise.resolve()
      .then(() => assertStrictRequest(req))
      .then(() => handle(ctx, req, res))
      .catch((err: unknown) => {
        const fe = sendError(res, err);
        if (fe.httpStatus >= 500) log.error({ code: fe.code, err: fe.message, url: req.url }, 'request failed');
      })
      .finally(() => log.debug({ method: req.method, url: req.url, status: res.statusCode, ms: Date.now() - started }, 'request'));
  };
}

/** The TCP surface: an allow list, checked before anything else runs. */
async function routeTcp(ctx: ApiContext, req: IncomingMessage, res: ServerResponse, throttle: AuthFailureThrottle | undefined): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://fusion.local');
  const parts = url.pathname.split('/').filter(Boolean);
  if (parts[0] === 'api') return routeResearch(ctx.research, req, res, parts, url.pathname, throttle);
  const hit = matchRoute(['health'], req.method ?? 'GET', url.pathname);
  if (hit?.kind === 'method_not_allowed') throw new FusionError('method_not_allowed', `${req.method ?? ''} is not allowed on ${url.pathname}; ${allowedMethodsText(hit.allowed)}`);
  if (hit !== undefined) return sendJson(res, 200, { ok: true, version: ctx.version, startedAt: ctx.startedAt });
  throw new FusionError('not_found', `no route ${url.pathname} on the TCP listener (it serves only /api/v1/research and /v1/health)`);
}

async function route(ctx: ApiContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://fusion.local');
  const parts = url.pathname.split('/').filter(Boolean);
  const method = req.method ?? 'GET';
  const caller = socketCaller(req);
  const daemonUid = ctx.daemonUid ?? process.getuid?.() ?? 0;
  const privileged = caller === undefined || isPrivileged(caller, daemonUid);
  const adminOnly = (): void => {
    if (!privileged) throw new FusionError('forbidden', `${url.pathname} is for root and the daemon's user only (you are uid ${caller?.uid ?? '?'})`);
  };
  /** The task, when this caller may see it; otherwise the not-found answer of a missing task. */
  const visible = async (id: string): Promise<TaskRecord> => {
    const task = await ctx.tasks.get(id);
    if (!maySeeTask(caller, task.callerUid, daemonUid)) throw noSuchTask(id);
    return task;
  };
  if (parts[0] === 'api') return routeResearch(ctx.research, req, res, parts, url.pathname);
  const names = SOCKET_ROUTES.filter((n) => (n !== 'metrics' || ctx.metrics !== undefined) && (n !== 'maintenance' || ctx.runMaintenance !== undefined));
  const hit = matchRoute(names, method, url.pathname);
  if (hit === undefined) throw new FusionError('not_found', `no route ${url.pathname}`);
  if (hit.kind === 'method_not_allowed') throw new FusionError('method_not_allowed', `${method} is not allowed on ${url.pathname}; ${allowedMethodsText(hit.allowed)}`);
  const { params } = hit;
  const id = params.id ?? '';
  switch (hit.name) {
    case 'metrics': {
      adminOnly();
      const { contentType, body } = await ctx.metrics!();
      res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
      res.end(body);
      return;
    }
    case 'health':
      // A socket-group member gets the liveness answer only: the full health names the data
      // directory, the roster, free space and queue depths (other callers' activity).
      if (!privileged) return sendJson(res, 200, { ok: true, version: ctx.version, startedAt: ctx.startedAt });
      return sendJson(res, 200, { ok: true, version: ctx.version, startedAt: ctx.startedAt, sandbox: await ctx.sandbox(), ...(await ctx.health?.()) });
    case 'maintenance':
      adminOnly();
      return sendJson(res, 200, { job: params.job, summary: await ctx.runMaintenance!(params.job!) });
    case 'events':
      return streamEvents(ctx, req, res, '*', 0, url.searchParams.get('follow') !== 'false', privileged ? undefined : caller);
    case 'taskList': {
      const stateParam = url.searchParams.get('state');
      if (stateParam !== null && !isTaskState(stateParam)) throw new FusionError('invalid_input', `state must be a task state, got ${JSON.stringify(stateParam)}`, { details: { field: 'state' } });
      const limit = intParam(url, 'limit', 100, 1000);
      // One more than asked tells whether the list was cut (the client says so, and how to see more).
      const tasks = await ctx.tasks.list({ ...(stateParam ? { state: stateParam } : {}), ...(privileged ? {} : { callerUid: caller.uid }), limit: limit + 1 });
      return sendJson(res, 200, { tasks: tasks.slice(0, limit).map(taskView), limit, truncated: tasks.length > limit });
    }
    case 'taskSubmit': {
      const workflow = params.workflow as 'investigate' | 'research';
      const label = admissionLabel(req, caller, privileged);
      // A submit the daemon would refuse whatever its body says is refused before the body is read.
      ctx.tasks.refuseEarly(label);
      const body = parseWith(SubmitBodySchema, await readJsonBody(req), 'submit body');
      const receipt = await ctx.tasks.submit({
        workflow, arguments: body.arguments, repo: body.repo, ...(body.options ? { options: body.options } : {}), ...(label ? { caller: label } : {}), ...(caller ? { identity: caller } : {}),
      });
      return sendJson(res, 202, receipt);
    }
    case 'task':
      return sendJson(res, 200, taskView(await visible(id)));
    case 'taskResult': {
      const delivery = url.searchParams.get('delivery') ?? 'auto';
      if (!(DELIVERY_MODES as readonly string[]).includes(delivery)) throw new FusionError('invalid_input', `delivery must be one of ${DELIVERY_MODES.join(', ')}, got ${JSON.stringify(delivery)}`, { details: { field: 'delivery' } });
      return sendJson(res, 200, await ctx.tasks.readResult(await visible(id), delivery as DeliveryMode, resultChecks(ctx)));
    }
    case 'taskAnswer': {
      const { answer, sha256 } = await ctx.tasks.readAnswer(await visible(id), resultChecks(ctx));
      res.writeHead(200, { 'content-type': 'text/markdown; charset=utf-8', 'content-length': answer.length, 'x-fusion-answer-sha256': sha256, 'cache-control': 'no-store' });
      res.end(answer);
      return;
    }
    case 'taskWait': {
      const timeoutMs = intParam(url, 'timeoutMs', 30_000, MAX_WAIT_MS);
      await visible(id);
      return sendJson(res, 200, await waitTerminal(ctx, id, timeoutMs, req));
    }
    case 'taskEvents':
      await visible(id);
      return streamEvents(ctx, req, res, id, intParam(url, 'after', 0, Number.MAX_SAFE_INTEGER), url.searchParams.get('follow') !== 'false');
    case 'taskCancel':
      await visible(id);
      return sendJson(res, 200, taskView(await ctx.tasks.cancel(id)));
  }
}

/** The socket's routes (the research routes are matched by research-routes.ts). */
const SOCKET_ROUTES = ['metrics', 'health', 'maintenance', 'events', 'taskList', 'taskSubmit', 'task', 'taskResult', 'taskAnswer', 'taskWait', 'taskEvents', 'taskCancel'] as const satisfies readonly RouteName[];

/** The daemon's checks for reading a result. */
function resultChecks(ctx: ApiContext): ResultChecks {
  return {
    ...(ctx.resultSeal ? { sealCheck: ctx.resultSeal } : {}),
    ...(ctx.attemptCheck ? { attemptCheck: ctx.attemptCheck } : {}),
  };
}

async function terminalNotification(ctx: ApiContext, id: string): Promise<TaskEvent | undefined> {
  const events = await ctx.tasks.eventsAfter(id, 0);
  return events.find((e) => e.kind === 'terminal');
}

async function waitTerminal(ctx: ApiContext, id: string, timeoutMs: number, req: IncomingMessage): Promise<Record<string, unknown>> {
  // A completed task also says whether it read nothing (docs/behaviour.md#nothing-read), so a
  // waiter can tell that from a real success without retrieving the result (which claims usage).
  const done = async (task: TaskRecord, event: TaskEvent | undefined): Promise<Record<string, unknown>> => ({
    terminal: isTerminal(task.state),
    task: taskView(task),
    notification: event?.data ?? null,
    ...(task.state === 'completed' ? { nothingRead: (await ctx.tasks.nothingRead(task)) !== null } : {}),
  });
  let task = await ctx.tasks.get(id);
  if (isTerminal(task.state)) return done(task, await terminalNotification(ctx, id));
  await new Promise<void>((resolve) => {
    let unsubscribe = (): void => undefined;
    const finish = (): void => {
      clearTimeout(timer);
      unsubscribe();
      req.off('close', finish);
      resolve();
    };
    const timer = setTimeout(finish, timeoutMs);
    unsubscribe = ctx.tasks.bus.subscribe(id, (e) => {
      if (e.kind === 'terminal') finish();
    });
    req.once('close', finish);
    // Close the race between the first read and the subscription.
    void ctx.tasks.get(id).then((t) => isTerminal(t.state) && finish(), finish);
  });
  task = await ctx.tasks.get(id);
  return done(task, isTerminal(task.state) ? await terminalNotification(ctx, id) : undefined);
}

/**
 * `onlyFor`: the all-tasks stream of a non-privileged caller carries only its own tasks' events.
 * Ownership is looked up once per task, in arrival order (a serial chain), so events stay in order.
 */
async function streamEvents(ctx: ApiContext, req: IncomingMessage, res: ServerResponse, id: string | '*', after: number, follow: boolean, onlyFor?: CallerIdentity): Promise<void> {
  res.writeHead(200, { 'content-type': 'application/x-ndjson; charset=utf-8', 'cache-control': 'no-store' });
  let lastSeq = after;
  const buffered: TaskEvent[] = [];
  let replaying = true;
  let ended = false;
  const owned = onlyFor === undefined ? undefined : ownedEventsFilter(async (taskId) => (await ctx.tasks.find(taskId))?.callerUid, onlyFor.uid);
  let chain = Promise.resolve();
  const deliver = (e: TaskEvent): void => {
    if (owned === undefined) return write(e);
    chain = chain.then(async () => {
      if (await owned.accepts(e)) write(e);
    }).catch(() => undefined);
  };
  const write = (e: TaskEvent): void => {
    if (ended || e.seq <= lastSeq) return;
    lastSeq = e.seq;
    res.write(`${JSON.stringify(e)}\n`);
    if (id !== '*' && e.kind === 'terminal') end();
  };
  const end = (): void => {
    if (ended) return;
    ended = true;
    unsubscribe();
    res.end();
  };
  const unsubscribe = follow
    ? ctx.tasks.bus.subscribe(id, (e) => (replaying ? buffered.push(e) : deliver(e)))
    : (): void => undefined;
  req.once('close', end);
  const history = id === '*' ? [] : await ctx.tasks.eventsAfter(id, after);
  for (const e of history) write(e);
  replaying = false;
  for (const e of buffered.sort((a, b) => a.seq - b.seq)) deliver(e);
  if (!follow) end();
  else if (id !== '*') {
    const task = await ctx.tasks.get(id);
    if (isTerminal(task.state) && !ended) {
      // Terminal before we subscribed and already written above, or an old task: stop here.
      end();
    }
  }
}

/**
 * The per-caller admission key (docs/behaviour.md#b2). A non-privileged caller is its uid, whatever
 * it sends: the header must not let it take another caller's places or many of its own. Root and
 * the daemon's uid (an MCP host or proxy serving several agents) may label their tasks with
 * `X-Fusion-Caller`.
 */
export function admissionLabel(req: IncomingMessage, caller: CallerIdentity | undefined, privileged: boolean): string | undefined {
  if (!privileged && caller !== undefined) return uidLabel(caller.uid);
  return headerLabel(req);
}

/** `X-Fusion-Caller`: a fairness label for the per-caller waiting bound, not an identity. */
function headerLabel(req: IncomingMessage): string | undefined {
  const raw = req.headers['x-fusion-caller'];
  if (raw === undefined) return undefined;
  const value = Array.isArray(raw) ? raw[0] ?? '' : raw;
  if (!/^[A-Za-z0-9._:@-]{1,64}$/.test(value)) {
    throw new FusionError('invalid_input', 'header X-Fusion-Caller must be 1-64 characters of A-Z a-z 0-9 . _ : @ -', { details: { field: 'x-fusion-caller' } });
  }
  return value;
}
