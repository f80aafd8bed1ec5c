/**
 * FusionClient: the one client of the daemon's APIs, used by the CLI, the MCP server and any
 * program (`import { FusionClient } from 'fusion-supervisor'`).
 *
 * Task API (Unix socket only): investigate/research → receipt, status, wait, result, cancel,
 * events (an async iterator over the NDJSON stream). Research-run API (the socket, or a TCP
 * base URL when the daemon listens with --listen): createRun, getRun, cancelRun, document,
 * snapshots, authenticated with a workspace API key. Every failure is a FusionError carrying
 * the daemon's code.
 */
import { resolve as resolvePath } from 'node:path';
import { FusionError } from '../errors.js';
import type { DaemonConfigInput } from '../contracts/config.js';
import type { Workflow } from '../contracts/constants.js';
import { DELIVERY_MODES } from '../contracts/api.js';
import { sha256Hex } from '../contracts/sha256.js';
import { processEnv, resolveHome, resolveSocket, type Env } from '../config/settings.js';
import { bytesRequest, describeEndpoint, envelopeError, errorReply, ndjson, rawRequest, DEFAULT_REQUEST_TIMEOUT_MS, type ApiReply, type Endpoint } from './transport.js';
import { API_ROUTES, routePath, type RouteName, type RouteParams } from '../contracts/routes.js';
import { startEmbeddedDaemon, type EmbeddedDaemon } from './embedded.js';
import type {
  BgResult, DeliveryMode, HealthReply, InvestigateToolInput, Receipt, ResearchCreateBody, ResearchCreateReply, ResearchDocumentView, ResearchRunList,
  ResearchRunView, ResearchSnapshotView, ResearchToolInput, SubmitOptions, TaskEvent, TaskView, WaitReply,
} from './types.js';

export interface FusionClientOptions {
  /** The daemon's socket; default FUSION_SOCKET, else `$FUSION_HOME/fusion.sock` (see the README). */
  socketPath?: string;
  /**
   * Start an in-process daemon when none answers on the socket (on the first call, or
   * `connect()`). `true` uses the defaults; an object gives the daemon's settings (its
   * `socketPath` defaults to this client's). `close()` stops it.
   */
  embedded?: boolean | Partial<DaemonConfigInput>;
  /** Base URL of the research API over TCP (`fusion daemon --listen`); research calls go there. */
  researchUrl?: string;
  /** Workspace API key for the research-run API (a per-call `apiKey` wins). */
  apiKey?: string;
  /** Environment for the socket default and the embedded daemon's model keys; default process.env. */
  env?: Env;
}

export interface EventsOptions {
  /** Stop following (the iterator ends quietly). */
  signal?: AbortSignal;
  /** Only events with a larger sequence number. */
  after?: number;
  /** false: replay the history and end; default true: end at the terminal event. */
  follow?: boolean;
}

export interface ResearchCallOptions {
  apiKey?: string;
}

const NO_ARGS = { flags: new Map<string, string[]>(), positionals: [], rest: [], order: [] };

export class FusionClient {
  readonly socketPath: string;
  private readonly embeddedInput: Partial<DaemonConfigInput> | undefined;
  private readonly researchEndpoint: Endpoint | undefined;
  private readonly apiKey: string | undefined;
  private readonly env: Env;
  private connecting: Promise<{ embedded: boolean }> | undefined;
  private embeddedDaemon: EmbeddedDaemon | undefined;

  constructor(options: FusionClientOptions | string = {}) {
    const o: FusionClientOptions = typeof options === 'string' ? { socketPath: options } : options;
    this.env = o.env ?? processEnv();
    this.socketPath = o.socketPath !== undefined ? resolvePath(o.socketPath) : resolveSocket(NO_ARGS, this.env);
    this.embeddedInput = o.embedded === true ? {} : o.embedded === false || o.embedded === undefined ? undefined : o.embedded;
    this.researchEndpoint = o.researchUrl === undefined ? undefined : { baseUrl: new URL(o.researchUrl) };
    this.apiKey = o.apiKey;
  }

  /** The socket endpoint. */
  private get socket(): Endpoint {
    return { socketPath: this.socketPath };
  }

  /**
   * Makes sure a daemon answers: with `embedded`, starts one in this process when none does.
   * Resolves `{ embedded: true }` when this client started it. Called by every request.
   */
  connect(): Promise<{ embedded: boolean }> {
    this.connecting ??= (async () => {
      if (this.embeddedInput === undefined || (await this.ping())) return { embedded: false };
      // The data directory follows the CLI's FUSION_HOME rules unless the caller gives one.
      this.embeddedDaemon = await startEmbeddedDaemon({ home: resolveHome(NO_ARGS, this.env), ...this.embeddedInput, socketPath: this.socketPath }, this.env);
      return { embedded: true };
    })();
    // A failed start may be retried by the next call.
    this.connecting.catch(() => (this.connecting = undefined));
    return this.connecting;
  }

  /** Stops the embedded daemon, if this client started one. */
  async close(): Promise<void> {
    const daemon = this.embeddedDaemon;
    this.embeddedDaemon = undefined;
    this.connecting = undefined;
    await daemon?.close();
  }

  // ----------------------------------------------------------------------------------------
  // Low level (socket)

  /** One request; a 4xx/5xx reply throws its FusionError. */
  async call(method: string, path: string, body?: unknown, timeoutMs = DEFAULT_REQUEST_TIMEOUT_MS): Promise<unknown> {
    await this.connect();
    const reply = await rawRequest(this.socket, method, path, body, timeoutMs);
    if (reply.status >= 400) throw envelopeError(reply);
    return reply.body;
  }

  /** One request answered whatever its status (no embedded start). */
  raw(method: string, path: string, body?: unknown, timeoutMs = DEFAULT_REQUEST_TIMEOUT_MS, headers: Record<string, string> = {}): Promise<ApiReply> {
    return rawRequest(this.socket, method, path, body, timeoutMs, headers);
  }

  /** An NDJSON event stream of the socket API. */
  /** Calls one route of the API (src/contracts/routes.ts): its method, its path with `params` filled in. */
  async callRoute<N extends RouteName>(name: N, params: RouteParams<N>, options: { query?: URLSearchParams | string; body?: unknown; timeoutMs?: number } = {}): Promise<unknown> {
    return this.call(API_ROUTES[name].method, routePath(name, params, options.query), options.body, options.timeoutMs);
  }

  async *stream(path: string, signal?: AbortSignal): AsyncGenerator<Record<string, unknown>> {
    await this.connect();
    yield* ndjson(this.socket, path, signal);
  }

  /**
   * True when a daemon answers its health check within 3 s. A socket this user may not open
   * throws `forbidden`: a daemon is there, and starting an embedded one would not help.
   */
  async ping(): Promise<boolean> {
    try {
      return (await rawRequest(this.socket, API_ROUTES.health.method, routePath('health', {}), undefined, 3_000)).status === 200;
    } catch (err) {
      if (err instanceof FusionError && err.code === 'forbidden') throw err;
      return false;
    }
  }

  async health(): Promise<HealthReply> {
    return this.callRoute('health', {}) as Promise<HealthReply>;
  }

  // ----------------------------------------------------------------------------------------
  // Tasks

  async investigate(args: InvestigateToolInput | Record<string, unknown>, options: SubmitOptions): Promise<Receipt> {
    return this.submit('investigate', args, options);
  }

  async research(args: ResearchToolInput | Record<string, unknown>, options: SubmitOptions): Promise<Receipt> {
    return this.submit('research', args, options);
  }

  /** Submits a task; resolves with the receipt once it passed durable preflight. */
  async submit(workflow: Workflow, args: unknown, options: SubmitOptions): Promise<Receipt> {
    if (typeof options?.repo !== 'string' || options.repo.trim() === '') throw new FusionError('invalid_input', 'repo must be an absolute directory path', { details: { field: 'repo' } });
    const body = { arguments: args, repo: resolvePath(options.repo), ...(options.options ? { options: options.options } : {}) };
    return this.callRoute('taskSubmit', { workflow }, { body }) as Promise<Receipt>;
  }

  async status(taskId: string): Promise<TaskView> {
    return this.callRoute('task', { id: idParam(taskId) }) as Promise<TaskView>;
  }

  async tasks(query: { state?: string; limit?: number } = {}): Promise<TaskView[]> {
    const q = new URLSearchParams();
    if (query.state !== undefined) q.set('state', query.state);
    if (query.limit !== undefined) q.set('limit', String(query.limit));
    return (this.callRoute('taskList', {}, { query: q }) as Promise<{ tasks: TaskView[] }>).then((r) => r.tasks);
  }

  /**
   * Waits until the task is terminal or `timeoutMs` passed (default 10 minutes); `terminal`
   * says which. Long waits are made of several long polls (the daemon caps one at 10 minutes).
   */
  async wait(taskId: string, options: { timeoutMs?: number } = {}): Promise<WaitReply> {
    const timeoutMs = options.timeoutMs ?? 600_000;
    if (!Number.isFinite(timeoutMs) || timeoutMs < 0) throw new FusionError('invalid_input', 'timeoutMs must be a non-negative number of milliseconds', { details: { field: 'timeoutMs' } });
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const left = Math.max(0, Math.round(deadline - Date.now()));
      const slice = Math.min(left, 600_000);
      const reply = (await this.callRoute('taskWait', { id: idParam(taskId) }, { query: `timeoutMs=${slice}`, timeoutMs: slice + 60_000 })) as WaitReply;
      if (reply.terminal || Date.now() >= deadline) return reply;
    }
  }

  /** bg_result: never blocks; `answer.present` says whether a verified answer exists. */
  async result(taskId: string, options: { delivery?: DeliveryMode } = {}): Promise<BgResult> {
    const delivery = options.delivery ?? 'auto';
    if (!(DELIVERY_MODES as readonly string[]).includes(delivery)) throw new FusionError('invalid_input', `delivery must be one of ${DELIVERY_MODES.join(', ')}, got ${JSON.stringify(delivery)}`, { details: { field: 'delivery' } });
    return this.callRoute('taskResult', { id: idParam(taskId) }, { query: `delivery=${delivery}` }) as Promise<BgResult>;
  }

  /**
   * The verified answer's bytes, whatever their size (`GET /v1/tasks/:id/answer`): for a caller
   * who cannot open an artifact's path. The bytes are checked against the daemon's digest and,
   * when given, the digest bg_result reported.
   */
  async answer(taskId: string, expectSha256?: string): Promise<Buffer> {
    await this.connect();
    const reply = await bytesRequest(this.socket, API_ROUTES.taskAnswer.method, routePath('taskAnswer', { id: idParam(taskId) }));
    if (reply.status >= 400) throw envelopeError(errorReply(reply));
    const observed = sha256Hex(reply.bytes);
    const sent = reply.headers['x-fusion-answer-sha256'];
    for (const expected of [sent, expectSha256]) {
      if (expected !== undefined && expected !== observed) {
        throw new FusionError('artifact_error', `the answer of task ${taskId} arrived with sha256:${observed}, not the verified sha256:${String(expected)}`, { details: { taskId, expected, observed } });
      }
    }
    return reply.bytes;
  }

  async cancel(taskId: string): Promise<TaskView> {
    return this.callRoute('taskCancel', { id: idParam(taskId) }) as Promise<TaskView>;
  }

  /** The task's events (history first), ending after its terminal event. */
  async *events(taskId: string, options: EventsOptions = {}): AsyncGenerator<TaskEvent> {
    const q = new URLSearchParams();
    if (options.after !== undefined) q.set('after', String(options.after));
    if (options.follow === false) q.set('follow', 'false');
    yield* this.stream(routePath('taskEvents', { id: idParam(taskId) }, q), options.signal) as AsyncGenerator<TaskEvent>;
  }

  /** New events of every task, from now on, until `signal` aborts. */
  async *allEvents(options: { signal?: AbortSignal } = {}): AsyncGenerator<TaskEvent> {
    yield* this.stream(routePath('events', {}), options.signal) as AsyncGenerator<TaskEvent>;
  }

  // ----------------------------------------------------------------------------------------
  // Research runs (bearer workspace key; socket or TCP)

  private async researchCall<N extends RouteName>(name: N, params: RouteParams<N>, options: ResearchCallOptions, extra: { body?: unknown; idempotencyKey?: string; query?: URLSearchParams } = {}): Promise<unknown> {
    const key = options.apiKey ?? this.apiKey;
    if (key === undefined || key === '') throw new FusionError('unauthorized', 'the research API needs a workspace API key (apiKey; create one with fusion keys create --workspace ID --kind workspace)');
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (extra.idempotencyKey !== undefined) headers['idempotency-key'] = extra.idempotencyKey;
    const endpoint = this.researchEndpoint ?? this.socket;
    if (this.researchEndpoint === undefined) await this.connect();
    const reply = await rawRequest(endpoint, API_ROUTES[name].method, routePath(name, params, extra.query), extra.body, DEFAULT_REQUEST_TIMEOUT_MS, headers);
    if (reply.status >= 400) throw envelopeError(reply);
    return reply.body;
  }

  /** Creates a durable research run (or returns the one this idempotency key already made). */
  async createRun(body: ResearchCreateBody, options: ResearchCallOptions & { idempotencyKey: string }): Promise<ResearchCreateReply> {
    return this.researchCall('researchCreate', {}, options, { body, idempotencyKey: options.idempotencyKey }) as Promise<ResearchCreateReply>;
  }

  /** The workspace's runs, newest first; pass `nextCursor` back as `cursor` for the next page (null: last page). */
  async listRuns(options: ResearchCallOptions & { limit?: number; cursor?: string } = {}): Promise<ResearchRunList> {
    const query = new URLSearchParams();
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    if (options.cursor !== undefined) query.set('cursor', options.cursor);
    return this.researchCall('researchList', {}, options, { query }) as Promise<ResearchRunList>;
  }

  async getRun(runId: string, options: ResearchCallOptions = {}): Promise<ResearchRunView> {
    return ((await this.researchCall('researchRun', { id: idParam(runId) }, options)) as { run: ResearchRunView }).run;
  }

  async cancelRun(runId: string, options: ResearchCallOptions & { idempotencyKey: string }): Promise<ResearchRunView> {
    return ((await this.researchCall('researchCancel', { id: idParam(runId) }, options, { idempotencyKey: options.idempotencyKey })) as { run: ResearchRunView }).run;
  }

  /** The run's Markdown document (not_found until the run succeeded). */
  async document(runId: string, options: ResearchCallOptions = {}): Promise<ResearchDocumentView> {
    return ((await this.researchCall('researchDocument', { id: idParam(runId) }, options)) as { document: ResearchDocumentView }).document;
  }

  async snapshots(runId: string, options: ResearchCallOptions = {}): Promise<ResearchSnapshotView[]> {
    return ((await this.researchCall('researchSnapshots', { id: idParam(runId) }, options)) as { snapshots: ResearchSnapshotView[] }).snapshots;
  }

  /** Where this client sends requests (for messages). */
  describe(): string {
    return describeEndpoint(this.researchEndpoint ?? this.socket);
  }
}

/** A task or run id as a route parameter (routePath percent-encodes it). */
function idParam(id: string): string {
  if (typeof id !== 'string' || id.trim() === '') throw new FusionError('invalid_input', 'an id is required', { details: { field: 'id' } });
  return id.trim();
}
