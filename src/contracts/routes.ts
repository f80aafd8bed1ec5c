/**
 * Every route of the daemon's HTTP API, declared once: the server routes by this table
 * (src/api/routes.ts, src/api/research-routes.ts) and the client and the CLI build their paths
 * from it (`routePath`), so a path cannot be spelled two ways.
 *
 * A template's `:name` segment matches one path segment (`:name(a|b)` only those values); paths
 * are compared segment by segment, empty segments ignored, as the server always read them.
 * Declaration order matters where two templates match one path: the first claims it, with every
 * route of the same template (`/v1/tasks/investigate` is the submit route, never a task id).
 */

export type RouteMethod = 'GET' | 'POST';

export interface RouteSpec {
  readonly method: RouteMethod;
  readonly path: string;
  /** What the route does, where one path has several methods (named in a wrong-method answer). */
  readonly does?: string;
}

export const API_ROUTES = {
  metrics: { method: 'GET', path: '/metrics' },
  health: { method: 'GET', path: '/v1/health' },
  maintenance: { method: 'POST', path: '/v1/admin/maintenance/:job' },
  events: { method: 'GET', path: '/v1/events' },
  taskList: { method: 'GET', path: '/v1/tasks' },
  taskSubmit: { method: 'POST', path: '/v1/tasks/:workflow(investigate|research)' },
  task: { method: 'GET', path: '/v1/tasks/:id' },
  taskResult: { method: 'GET', path: '/v1/tasks/:id/result' },
  taskAnswer: { method: 'GET', path: '/v1/tasks/:id/answer' },
  taskWait: { method: 'GET', path: '/v1/tasks/:id/wait' },
  taskEvents: { method: 'GET', path: '/v1/tasks/:id/events' },
  taskCancel: { method: 'POST', path: '/v1/tasks/:id/cancel' },
  researchList: { method: 'GET', path: '/api/v1/research', does: 'list' },
  researchCreate: { method: 'POST', path: '/api/v1/research', does: 'create' },
  researchRun: { method: 'GET', path: '/api/v1/research/:id' },
  researchCancel: { method: 'POST', path: '/api/v1/research/:id/cancel' },
  researchDocument: { method: 'GET', path: '/api/v1/research/:id/document' },
  researchSnapshots: { method: 'GET', path: '/api/v1/research/:id/snapshots' },
} as const satisfies Record<string, RouteSpec>;

export type RouteName = keyof typeof API_ROUTES;

/** The parameter names of a template (`'/v1/tasks/:id/wait'` → `'id'`). */
type ParamsOf<P extends string> = P extends `${string}:${infer Rest}`
  ? Rest extends `${infer Name}/${infer Tail}` ? StripChoices<Name> | ParamsOf<`/${Tail}`> : StripChoices<Rest>
  : never;
type StripChoices<N extends string> = N extends `${infer Name}(${string}` ? Name : N;
export type RouteParams<N extends RouteName> = Record<ParamsOf<(typeof API_ROUTES)[N]['path']>, string>;

/** The path segments as the server reads them: split on '/', empty segments dropped. */
export function pathSegments(pathname: string): string[] {
  return pathname.split('/').filter(Boolean);
}

/** A template's parameters taken from `segments`, or undefined when the template does not match. Values stay as sent (percent-encoded). */
export function matchTemplate(template: string, segments: readonly string[]): Record<string, string> | undefined {
  const parts = pathSegments(template);
  if (parts.length !== segments.length) return undefined;
  const params: Record<string, string> = {};
  for (const [i, part] of parts.entries()) {
    const segment = segments[i]!;
    if (!part.startsWith(':')) {
      if (part !== segment) return undefined;
      continue;
    }
    const choice = /^:(\w+)(?:\(([^)]*)\))?$/.exec(part);
    const name = choice?.[1] ?? part.slice(1);
    if (choice?.[2] !== undefined && !choice[2].split('|').includes(segment)) return undefined;
    params[name] = segment;
  }
  return params;
}

export type RouteMatch<N extends RouteName> =
  | { kind: 'route'; name: N; params: Record<string, string> }
  /** The path names a route, but not with this method: the methods it has, and what each does. */
  | { kind: 'method_not_allowed'; allowed: ReadonlyArray<RouteSpec> };

/**
 * The route among `names` that serves `method` on `pathname`; undefined when no template of
 * them matches the path. The first matching template (in `names`' order) claims the path.
 */
export function matchRoute<N extends RouteName>(names: readonly N[], method: string, pathname: string): RouteMatch<N> | undefined {
  const segments = pathSegments(pathname);
  for (const name of names) {
    const params = matchTemplate(API_ROUTES[name].path, segments);
    if (params === undefined) continue;
    const template = API_ROUTES[name].path;
    const sameTemplate = names.filter((n) => API_ROUTES[n].path === template);
    const served = sameTemplate.find((n) => API_ROUTES[n].method === method);
    if (served !== undefined) return { kind: 'route', name: served, params };
    return { kind: 'method_not_allowed', allowed: sameTemplate.map((n) => API_ROUTES[n]) };
  }
  return undefined;
}

/** `use GET`, or `use GET (list) or POST (create)`: the end of a wrong-method answer. */
export function allowedMethodsText(allowed: ReadonlyArray<RouteSpec>): string {
  return `use ${allowed.map((r) => (r.does === undefined ? r.method : `${r.method} (${r.does})`)).join(' or ')}`;
}

/** The path of route `name` with its parameters filled in (percent-encoded), and an optional query. */
export function routePath<N extends RouteName>(name: N, params: RouteParams<N>, query?: URLSearchParams | string): string {
  const values = params as Record<string, string>;
  const path = API_ROUTES[name].path.replace(/:(\w+)(?:\([^)]*\))?/g, (_m, key: string) => {
    const value = values[key];
    if (value === undefined) throw new TypeError(`route ${name} needs its ${key} parameter`);
    return encodeURIComponent(value);
  });
  const q = query === undefined ? '' : query.toString();
  return q === '' ? path : `${path}?${q}`;
}
