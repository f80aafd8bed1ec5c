/**
 * Two loopback web sites for the crawl tests: a.test on 127.0.0.2 and b.test on 127.0.0.3,
 * reached only through the guard's seams (static overrides + allowCidrs for exactly those two
 * addresses); 127.0.0.1 stays blocked. Each test sets the pages it needs.
 */
import type http from 'node:http';
import { createGuardedFetch, type GuardedFetch } from '../../../src/egress/guarded-fetch.js';
import { captureLog, startHttpOrigin, type CapturedLog, type Listener } from '../egress/origin.js';

export const IP_A = '127.0.0.2';
export const IP_B = '127.0.0.3';

export interface Page {
  status?: number;
  type?: string;
  body?: string | Buffer;
  headers?: Record<string, string>;
  /** Answer after this many ms. */
  delayMs?: number;
}

export interface Site {
  readonly origin: Listener;
  readonly host: string;
  pages: Map<string, Page>;
  /** `http://host:port{path}`. */
  url(path: string): string;
  /** Request targets seen, in order. */
  readonly requests: string[];
}

function serve(pages: Map<string, Page>): (req: http.IncomingMessage, res: http.ServerResponse) => void {
  return (req, res) => {
    const page = pages.get(req.url ?? '') ?? { status: 404, type: 'text/plain', body: 'not found' };
    const answer = (): void => {
      if (res.destroyed) return;
      res.writeHead(page.status ?? 200, { 'content-type': page.type ?? 'text/html; charset=utf-8', ...page.headers });
      res.end(page.body ?? '');
    };
    // A page with delayMs is a slow origin on purpose.
    if (page.delayMs === undefined) answer();
    else setTimeout(answer, page.delayMs).unref();
  };
}

export async function startSite(host: string, ip: string): Promise<Site> {
  const pages = new Map<string, Page>();
  const origin = await startHttpOrigin(serve(pages), ip);
  return { origin, host, pages, url: (path) => `http://${host}:${String(origin.port)}${path}`, requests: origin.requests };
}

export interface Guard {
  fetch: GuardedFetch;
  logs: CapturedLog;
}

export function guardFor(): Guard {
  const logs = captureLog();
  const fetch = createGuardedFetch({
    log: logs.log,
    resolveOverrides: new Map([
      ['a.test', IP_A],
      ['b.test', IP_B],
    ]),
    allowCidrs: [`${IP_A}/32`, `${IP_B}/32`],
  });
  return { fetch, logs };
}

/** A small HTML page linking to `links`. */
export function html(title: string, text: string, links: string[] = []): string {
  const anchors = links.map((href, i) => `<li><a href="${href}">link ${String(i)}</a></li>`).join('');
  return `<!doctype html><html><head><title>${title}</title><script>window.evil = "SCRIPT-TEXT";</script><style>p{color:red}</style></head><body><h1>${title}</h1><p>${text}</p><ul>${anchors}</ul></body></html>`;
}
