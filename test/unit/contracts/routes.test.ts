import { describe, expect, it } from 'vitest';
import { allowedMethodsText, API_ROUTES, matchRoute, routePath, type RouteName } from '../../../src/contracts/routes.js';

const ALL = Object.keys(API_ROUTES) as RouteName[];

describe('routePath', () => {
  it('fills parameters, percent-encoded, and appends a query', () => {
    expect(routePath('task', { id: 'investigate-0123' })).toBe('/v1/tasks/investigate-0123');
    expect(routePath('researchDocument', { id: 'a/b c' })).toBe('/api/v1/research/a%2Fb%20c/document');
    expect(routePath('taskWait', { id: 'x' }, 'timeoutMs=5')).toBe('/v1/tasks/x/wait?timeoutMs=5');
    expect(routePath('taskList', {}, new URLSearchParams())).toBe('/v1/tasks');
    expect(routePath('taskSubmit', { workflow: 'research' })).toBe('/v1/tasks/research');
  });

  it('every built path is matched back to its own route', () => {
    for (const name of ALL) {
      const params = Object.fromEntries([...API_ROUTES[name].path.matchAll(/:(\w+)(?:\(([^)|]*)[^)]*\))?/g)].map((m) => [m[1], m[2] ?? 'research-0f']));
      const hit = matchRoute(ALL, API_ROUTES[name].method, routePath(name, params as never));
      expect(hit).toEqual({ kind: 'route', name, params });
    }
  });
});

describe('matchRoute', () => {
  it('reads paths segment by segment, as the server always did', () => {
    expect(matchRoute(ALL, 'GET', '/v1//tasks/')).toMatchObject({ kind: 'route', name: 'taskList' });
  });

  it('lets the submit template claim its path: a GET there is the wrong method, not a task id', () => {
    const hit = matchRoute(ALL, 'GET', '/v1/tasks/investigate');
    expect(hit).toEqual({ kind: 'method_not_allowed', allowed: [API_ROUTES.taskSubmit] });
    expect(matchRoute(ALL, 'GET', '/v1/tasks/investigate-1')).toMatchObject({ kind: 'route', name: 'task', params: { id: 'investigate-1' } });
  });

  it('names every method of a path with several', () => {
    const hit = matchRoute(ALL, 'DELETE', '/api/v1/research');
    expect(hit?.kind).toBe('method_not_allowed');
    expect(allowedMethodsText(hit?.kind === 'method_not_allowed' ? hit.allowed : [])).toBe('use GET (list) or POST (create)');
    expect(matchRoute(ALL, 'GET', '/v1/tasks/x/cancel')).toEqual({ kind: 'method_not_allowed', allowed: [API_ROUTES.taskCancel] });
  });

  it('matches only the routes it is given', () => {
    expect(matchRoute(['health'], 'GET', '/v1/tasks')).toBeUndefined();
    expect(matchRoute(ALL, 'GET', '/v1/tasks/x/y/z')).toBeUndefined();
    expect(matchRoute(ALL, 'GET', '/v2/health')).toBeUndefined();
  });
});
