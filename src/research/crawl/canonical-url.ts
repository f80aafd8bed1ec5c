/**
 * Canonical URLs of a research crawl: the key under which a page is fetched once per run.
 *
 * The guard's own URL shaping (parseFetchUrl: http(s) only, no credentials, lowercase scheme and
 * host, trailing dots stripped, default port dropped, fragment dropped) plus one crawl rule:
 * query parameters sorted by key, then value (stable, compared as the raw encoded text, so
 * nothing is re-encoded), and an empty query dropped. The path is kept as written (WHATWG
 * normalised): `/a` and `/a/` stay distinct pages.
 *
 * Throws the guard's FusionError (`invalid_url`, `unsupported_scheme`) for a URL the guard would
 * refuse on shape alone, so a bad source URL fails exactly as its fetch would.
 */
import { parseFetchUrl } from '../../egress/fetch-url.js';

export interface CanonicalUrl {
  /** The canonical text (`URL.href` form). */
  url: string;
  /** Lowercase host without brackets (IPv6) or trailing dots. */
  host: string;
  /** `scheme://host[:port]`: the scope of one robots.txt. */
  origin: string;
}

function compareParams(a: string, b: string): number {
  const ka = a.split('=', 1)[0] ?? '';
  const kb = b.split('=', 1)[0] ?? '';
  if (ka !== kb) return ka < kb ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Sorts `a=1&b=2` segments by key then value (Array.prototype.sort is stable). */
export function sortQuery(search: string): string {
  const query = search.startsWith('?') ? search.slice(1) : search;
  if (query === '') return '';
  return `?${query.split('&').sort(compareParams).join('&')}`;
}

export function canonicalizeCrawlUrl(raw: string, base?: string): CanonicalUrl {
  const target = parseFetchUrl(raw, 0, base === undefined ? undefined : new URL(base));
  const url = target.url;
  url.search = sortQuery(url.search);
  return { url: url.href, host: target.host, origin: url.origin };
}
