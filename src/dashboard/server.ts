/**
 * The read-only dashboard's HTTP server (docs/operations.md#dashboard, threat model in
 * docs/security.md#dashboard). Loopback by default; every connection's local user is read from
 * /proc at accept (peer-uid.ts) and judged by the socket's rules (viewers.ts). A non-loopback
 * address serves only requests with a workspace key.
 *
 * What a hostile page, link or local user cannot do here:
 * - change anything: only GET and HEAD are served (405 otherwise), and no GET has a side effect,
 *   so a cross-site request forges nothing;
 * - reach it through a name they control (DNS rebinding): the Host header must name the bound
 *   address itself (or `localhost` for a loopback one), else 421;
 * - run script in it: every page is server-rendered with the auto-escaping template, and the CSP
 *   admits only the one static script (no inline script or style, no plugins, no frames);
 * - read another user's task, tarball or run: each route reads through the viewer's scope, and a
 *   foreign id answers exactly like a missing one (404);
 * - hold the listener's connections: a refusal (anything but 404) closes its connection, a
 *   connection answers one request at a time (a pipelining client is disconnected), and a local
 *   user other than root and the daemon's holds at most MAX_CONNECTIONS_PER_UID connections, so
 *   no user, in the socket group or not, can keep root out with requests it never reads;
 * - stall the daemon: the caller's uid is looked up off the event loop, one /proc read per burst
 *   of connections (peer-uid.ts), however long a local user makes the kernel's socket tables.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Logger } from '../log.js';
import { isTaskState } from '../contracts/task-state.js';
import { FusionError, toFusionError } from '../errors.js';
import { isLoopbackHost, listenOnTcp, type ListenAddress } from '../api/tcp-listener.js';
import { MAX_URL_BYTES } from '../api/request-guard.js';
import { principalOf } from '../api/research-routes.js';
import { markAuthenticated } from '../api/tcp-admission.js';
import { AuthFailureThrottle } from '../api/auth-throttle.js';
import type { ApiKeyStore } from '../store/research-port.js';
import type { DashboardData } from './data.js';
import { PeerUidLookup, canonicalAddress, type TcpEndpoint } from './peer-uid.js';
import { errorPage, overviewPage, researchListPage, researchPage, taskPage, tasksPage, type PageContext } from './pages.js';
import { STATIC_ASSETS } from './assets.js';
import type { Viewer, ViewerRules } from './viewers.js';

export const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
};

/** Task and run ids are `[A-Za-z0-9_-]`; anything else is not an id and is answered 404 before any lookup. */
const ID_PATTERN = /^[A-Za-z0-9_-]{1,200}$/u;
const LIST_LIMIT = 200;
const RECENT_LIMIT = 15;
/**
 * Open connections one local user other than root and the daemon's may hold (a browser opens six
 * per origin). Without it, a local user, even one outside the socket group, could take every slot
 * of the listener with pipelined requests it never reads, each answer stuck half-written, and
 * lock root out; over the bound a connection's request is answered 429 and the connection closed.
 */
export const MAX_CONNECTIONS_PER_UID = 16;

export interface DashboardOptions {
  address: ListenAddress;
  data: DashboardData;
  rules: ViewerRules;
  userName: (uid: number) => string | undefined;
  /** Keys for a non-loopback address (workspace keys, as the research TCP listener takes). */
  keys: ApiKeyStore;
  log: Logger;
  /** Test seam: how a connection's local uid is read (default /proc/net/tcp{,6}, see peer-uid.ts). */
  peerUid?: (peer: { address: string; port: number }, server: { address: string; port: number }) => number | undefined | Promise<number | undefined>;
  throttle?: AuthFailureThrottle;
}

export interface DashboardServer {
  server: Server;
  host: string;
  port: number;
  /** The page's origin, e.g. http://127.0.0.1:8788. */
  url: string;
}

/** `host:port` spellings a browser sends for the bound address: the literal (IPv6 in brackets), and `localhost` for loopback. */
export function allowedHosts(host: string, port: number): Set<string> {
  const literal = host.includes(':') ? `[${canonicalAddress(host)}]` : host.toLowerCase();
  const out = new Set([`${literal}:${port}`]);
  if (isLoopbackHost(host)) out.add(`localhost:${port}`);
  if (host === 'localhost') out.add(`127.0.0.1:${port}`);
  return out;
}

/**
 * Every refusal but 404 (which a person browsing meets) ends its connection after the answer: no
 * keep-alive, and requests pipelined behind it are dropped, so a refused caller holds no slot.
 */
const CLOSE: Readonly<Record<string, string>> = { connection: 'close' };

class HttpRefusal extends Error {
  constructor(readonly status: number, message: string, readonly headers: Record<string, string> = {}) {
    super(message);
  }
}

export async function startDashboard(options: DashboardOptions): Promise<DashboardServer> {
  const { data, rules, log } = options;
  const loopback = isLoopbackHost(options.address.host);
  const throttle = options.throttle ?? new AuthFailureThrottle();
  const lookup = new PeerUidLookup();
  const peerUid = options.peerUid ?? ((peer: TcpEndpoint, server: TcpEndpoint) => lookup.lookup(peer, server));
  /** Each connection's local uid, looked up once at accept (undefined: not found, the connection is refused). */
  const uids = new WeakMap<Socket, Promise<number | undefined>>();
  /** Connections over their uid's MAX_CONNECTIONS_PER_UID: their request is refused, then they close. */
  const overBound = new WeakSet<Socket>();
  const perUid = new Map<number, number>();
  /** Connections whose refusal ends them: requests pipelined behind it are not even rendered. */
  const ending = new WeakSet<Socket>();
  /** Connections with a request being answered. */
  const answering = new WeakSet<Socket>();
  const tcp = await listenOnTcp(options.address, (req, res) => {
    // No browser pipelines; a client that does could queue thousands of requests per connection,
    // each rendered even though its answer would never be read. One request at a time, or the
    // connection is closed.
    if (answering.has(req.socket)) {
      req.socket.destroy();
      return;
    }
    answering.add(req.socket);
    res.once('close', () => answering.delete(req.socket));
    handle(req, res).catch((err: unknown) => {
      log.error({ err: toFusionError(err).message, url: req.url?.slice(0, 200) }, 'dashboard request failed');
      if (!res.headersSent) send(res, req, 500, 'text/html; charset=utf-8', page(500, 'The dashboard could not answer; see the daemon log.'));
      else res.destroy();
    });
  });
  const hosts = allowedHosts(options.address.host, tcp.port);
  if (loopback) {
    tcp.server.on('connection', (socket: Socket) => {
      const { remoteAddress, remotePort, localAddress, localPort } = socket;
      // Started now, while our end is open: the 4-tuple names this connection and no other.
      const found = remoteAddress !== undefined && remotePort !== undefined && localAddress !== undefined && localPort !== undefined
        ? Promise.resolve().then(() => peerUid({ address: remoteAddress, port: remotePort }, { address: localAddress, port: localPort })).catch(() => undefined)
        : Promise.resolve(undefined);
      uids.set(socket, found.then((uid) => {
        if (uid === undefined) {
          log.warn({ remote: remoteAddress, port: remotePort }, 'dashboard connection refused: its local user could not be read from /proc/net/tcp');
          socket.destroy();
          return undefined;
        }
        if (!socket.destroyed && !rules.seesAll(uid)) holdPerUid(socket, uid);
        return uid;
      }));
    });
  }

  function holdPerUid(socket: Socket, uid: number): void {
    const held = perUid.get(uid) ?? 0;
    if (held >= MAX_CONNECTIONS_PER_UID) {
      overBound.add(socket);
      return;
    }
    perUid.set(uid, held + 1);
    socket.once('close', () => {
      const left = (perUid.get(uid) ?? 1) - 1;
      if (left <= 0) perUid.delete(uid);
      else perUid.set(uid, left);
    });
  }

  const baseContext = (viewer: string): PageContext => ({ now: Date.now(), viewer, userName: options.userName });
  const page = (status: number, message: string, viewer = ''): string => errorPage(baseContext(viewer), status, message);

  /** The connection's local uid (loopback only), once it is known; refused when unknown or over its bound. */
  async function callerUid(req: IncomingMessage): Promise<number> {
    const uid = await uids.get(req.socket);
    if (uid === undefined) throw new HttpRefusal(403, 'Your local user could not be determined.');
    if (overBound.has(req.socket)) throw new HttpRefusal(429, `uid ${uid} already holds ${MAX_CONNECTIONS_PER_UID} open connections to this dashboard; close some and retry.`, { 'retry-after': '1' });
    return uid;
  }

  async function viewerOf(req: IncomingMessage): Promise<Viewer> {
    if (loopback) {
      const uid = await callerUid(req);
      const viewer = await rules.forUid(uid, options.userName(uid));
      if (viewer === undefined) throw new HttpRefusal(403, `uid ${uid} may not use this dashboard: it is for root, the daemon's user and members of the daemon's socket group.`);
      markAuthenticated(req);
      return viewer;
    }
    try {
      const principal = await principalOf({ keys: options.keys }, req, throttle);
      return { scope: { all: false, workspaceId: principal.workspaceId }, label: `workspace ${principal.workspaceId}: its research runs` };
    } catch (err) {
      const fe = toFusionError(err);
      if (fe.code === 'rate_limited') throw new HttpRefusal(429, fe.message);
      throw new HttpRefusal(fe.code === 'forbidden' ? 403 : 401, fe.message, fe.code === 'forbidden' ? {} : { 'www-authenticate': 'Bearer realm="fusion dashboard"' });
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (ending.has(req.socket)) return;
    try {
      const method = req.method ?? 'GET';
      // Checked first: a rebinding page must learn nothing, not even whether a route exists.
      const host = (req.headers.host ?? '').toLowerCase();
      if (!hosts.has(host)) throw new HttpRefusal(421, 'This dashboard answers only to its own address (the Host header names another).');
      if (method !== 'GET' && method !== 'HEAD') throw new HttpRefusal(405, 'The dashboard is read-only: GET and HEAD only.', { allow: 'GET, HEAD' });
      const raw = req.url ?? '/';
      if (raw.length > MAX_URL_BYTES || !raw.startsWith('/')) throw new HttpRefusal(414, 'The URL is too long or not a path.');
      const url = new URL(raw, 'http://dashboard.invalid');
      let parts: string[];
      try {
        parts = url.pathname.split('/').filter(Boolean).map((p) => decodeURIComponent(p));
      } catch {
        throw new HttpRefusal(400, 'The path is not valid percent-encoding.');
      }
      // Before anything is served, the static files included: a connection over its uid's bound must not stay open on them.
      if (loopback) await callerUid(req);
      if (parts[0] === 'static' && parts.length === 2) {
        const asset = STATIC_ASSETS.get(parts[1]!);
        if (asset === undefined) throw new HttpRefusal(404, 'No such file.');
        if (req.headers['if-none-match'] === asset.etag) {
          res.writeHead(304, { ...SECURITY_HEADERS, 'cache-control': 'no-cache', etag: asset.etag });
          res.end();
          return;
        }
        return send(res, req, 200, asset.contentType, asset.body, { 'cache-control': 'no-cache', etag: asset.etag });
      }
      const viewer = await viewerOf(req);
      const ctx = baseContext(viewer.label);
      const scope = viewer.scope;
      const notFound = (what: string): HttpRefusal => new HttpRefusal(404, `No ${what} with that id is visible to you.`);
      const htmlType = 'text/html; charset=utf-8';
      if (parts.length === 0) {
        const [overview, recent] = await Promise.all([data.overview(scope), data.tasks(scope, undefined, RECENT_LIMIT)]);
        return send(res, req, 200, htmlType, overviewPage(ctx, overview, recent));
      }
      if (parts[0] === 'tasks') {
        if (parts.length === 1) {
          const state = url.searchParams.get('state') ?? '';
          if (state !== '' && !isTaskState(state)) throw new HttpRefusal(400, 'state must be a task state.');
          const filter = state === '' ? undefined : (state as Parameters<typeof tasksPage>[2]);
          return send(res, req, 200, htmlType, tasksPage(ctx, await data.tasks(scope, filter, LIST_LIMIT), filter));
        }
        const id = parts[1]!;
        if (!ID_PATTERN.test(id)) throw notFound('task');
        if (parts.length === 2) {
          const detail = await data.task(scope, id);
          if (detail === null) throw notFound('task');
          return send(res, req, 200, htmlType, taskPage(ctx, detail));
        }
        if (parts.length === 3 && parts[2] === 'audit.tar') {
          const tar = await data.tarball(scope, id);
          if (tar === null) throw notFound('sealed task tarball');
          return send(res, req, 200, 'application/x-tar', tar, { 'content-disposition': `attachment; filename="${id}.tar"` });
        }
      }
      if (parts[0] === 'research') {
        if (parts.length === 1) return send(res, req, 200, htmlType, researchListPage(ctx, await data.researchRuns(scope, LIST_LIMIT)));
        const id = parts[1]!;
        if (parts.length === 2 && ID_PATTERN.test(id)) {
          const found = await data.researchRun(scope, id);
          if (found === null) throw notFound('research run');
          return send(res, req, 200, htmlType, researchPage(ctx, found.run, found.snapshots, found.document));
        }
        throw notFound('research run');
      }
      throw new HttpRefusal(404, 'No such page.');
    } catch (err) {
      if (!(err instanceof HttpRefusal)) throw err instanceof FusionError ? err : toFusionError(err);
      if (ending.has(req.socket)) return;
      if (err.status !== 404) ending.add(req.socket);
      send(res, req, err.status, 'text/html; charset=utf-8', page(err.status, err.message), err.status === 404 ? err.headers : { ...CLOSE, ...err.headers });
    }
  }

  const bound = tcp.server.address() as AddressInfo;
  const hostText = options.address.host.includes(':') ? `[${options.address.host}]` : options.address.host;
  log.info({ host: options.address.host, port: bound.port, loopback }, 'dashboard listening');
  return { server: tcp.server, host: options.address.host, port: bound.port, url: `http://${hostText}:${bound.port}` };
}

function send(res: ServerResponse, req: IncomingMessage, status: number, contentType: string, body: string | Buffer, extra: Record<string, string> = {}): void {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  res.writeHead(status, { ...SECURITY_HEADERS, ...extra, 'content-type': contentType, 'content-length': bytes.length });
  res.end(req.method === 'HEAD' ? undefined : bytes);
}
