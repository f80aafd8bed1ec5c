/**
 * Web-search settings (docs/behaviour.md#g14): which provider, where it answers, which hosts
 * search requests may reach, and the provider's key. Built from an environment record the
 * caller passes (only src/cli/ and src/main.ts read process.env).
 *
 * - `FUSION_SEARCH_PROVIDER`: `searxng` (a SearXNG instance's JSON API, no key) or `brave` (the
 *   Brave Search API, key required). Unset: web search is off and says how to turn it on.
 * - `FUSION_SEARCH_URL`: the provider's base URL. Required for searxng; brave defaults to
 *   `https://api.search.brave.com`.
 * - `FUSION_SEARCH_ALLOW_HOSTS`: comma-separated hosts search requests may reach. brave
 *   defaults to `api.search.brave.com`; searxng has no default (an operator names the instance's
 *   host explicitly). The URL's host must be listed, else the configuration is refused.
 * - `FUSION_SEARCH_API_KEY`: the provider's key (brave). Never logged, never passed to a
 *   sandbox, never part of an error message.
 */
import { FusionError } from '../errors.js';
import { normalizeHostname } from '../contracts/source-url.js';

export const SEARCH_PROVIDERS = ['searxng', 'brave'] as const;
export type SearchProviderName = (typeof SEARCH_PROVIDERS)[number];

export const BRAVE_DEFAULT_URL = 'https://api.search.brave.com';

/** One search call's deadline (DNS, connect, transfer): a search answer is small and quick. */
export const SEARCH_DEADLINE_MS = 15_000;

export interface SearchConfig {
  provider: SearchProviderName;
  /** Base URL, no query or fragment (the provider's paths are appended to its path). */
  baseUrl: URL;
  allowHosts: ReadonlySet<string>;
  /** The provider's key; never logged (toJSON hides it). */
  apiKey?: string;
  deadlineMs: number;
}

export type SearchEnv = Readonly<Record<string, string | undefined>>;

function bad(message: string, variable: string): FusionError {
  return new FusionError('invalid_config', message, { details: { path: variable } });
}

function hostOf(url: URL): string {
  const host = url.hostname;
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1).toLowerCase() : normalizeHostname(host);
}

/**
 * One FUSION_SEARCH_ALLOW_HOSTS entry spelled as the guard will see the URL's host: parsed by
 * the same WHATWG rules (IDNA to punycode, IPv4 shorthand to a dotted quad, IPv6 compressed),
 * lowercase, trailing dots stripped. Anything but a bare host (a port, a path, credentials) is
 * refused rather than silently widened or never matched.
 */
function allowEntry(raw: string): string {
  const bare = raw.replace(/^\[(.*)\]$/u, '$1');
  const notHost = bad(`FUSION_SEARCH_ALLOW_HOSTS entry ${JSON.stringify(raw.slice(0, 100))} is not a bare host name or IP address (no scheme, port or path)`, 'FUSION_SEARCH_ALLOW_HOSTS');
  let url: URL;
  try {
    url = new URL(`http://${bare.includes(':') ? `[${bare}]` : bare}/`);
  } catch {
    throw notHost;
  }
  if (url.host !== url.hostname || url.pathname !== '/' || url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') throw notHost;
  return hostOf(url);
}

/**
 * The search configuration of `env`, or null when no provider is set. A present but unusable
 * setting is `invalid_config` naming the variable and the fix.
 */
export function searchConfigFrom(env: SearchEnv): SearchConfig | null {
  const provider = env.FUSION_SEARCH_PROVIDER?.trim().toLowerCase();
  if (provider === undefined || provider === '') return null;
  if (!(SEARCH_PROVIDERS as readonly string[]).includes(provider)) {
    throw bad(`FUSION_SEARCH_PROVIDER must be one of ${SEARCH_PROVIDERS.join(', ')}, got ${JSON.stringify(provider.slice(0, 40))}`, 'FUSION_SEARCH_PROVIDER');
  }
  const name = provider as SearchProviderName;
  const rawUrl = env.FUSION_SEARCH_URL?.trim() || (name === 'brave' ? BRAVE_DEFAULT_URL : '');
  if (rawUrl === '') throw bad('FUSION_SEARCH_URL must be set for searxng: the base URL of the SearXNG instance, e.g. https://search.example.org', 'FUSION_SEARCH_URL');
  let baseUrl: URL;
  try {
    baseUrl = new URL(rawUrl);
  } catch {
    throw bad(`FUSION_SEARCH_URL is not a URL: ${JSON.stringify(rawUrl.slice(0, 200))}`, 'FUSION_SEARCH_URL');
  }
  if (baseUrl.protocol !== 'http:' && baseUrl.protocol !== 'https:') throw bad('FUSION_SEARCH_URL must be an http(s) URL', 'FUSION_SEARCH_URL');
  if (baseUrl.username !== '' || baseUrl.password !== '') throw bad('FUSION_SEARCH_URL must not contain credentials; put a key in FUSION_SEARCH_API_KEY', 'FUSION_SEARCH_URL');
  if (baseUrl.search !== '' || baseUrl.hash !== '') throw bad('FUSION_SEARCH_URL must be a base URL without a query or fragment', 'FUSION_SEARCH_URL');

  const listed = (env.FUSION_SEARCH_ALLOW_HOSTS ?? '').split(',').map((h) => h.trim()).filter((h) => h !== '');
  const allowList = listed.length > 0 ? listed : name === 'brave' ? [new URL(BRAVE_DEFAULT_URL).hostname] : [];
  const allowHosts = new Set(allowList.map(allowEntry));
  const host = hostOf(baseUrl);
  if (!allowHosts.has(host)) {
    throw bad(
      `the search provider host ${host} is not in FUSION_SEARCH_ALLOW_HOSTS (${allowHosts.size === 0 ? 'empty' : [...allowHosts].join(', ')}); list it there to allow search requests to it`,
      'FUSION_SEARCH_ALLOW_HOSTS',
    );
  }

  const apiKey = env.FUSION_SEARCH_API_KEY?.trim();
  if (name === 'brave' && (apiKey === undefined || apiKey === '')) throw bad('FUSION_SEARCH_API_KEY must be set for brave (the Brave Search API subscription token)', 'FUSION_SEARCH_API_KEY');
  // The key becomes a request header: one line of visible characters.
  if (apiKey !== undefined && apiKey !== '' && !/^[\x21-\x7e]+$/u.test(apiKey)) throw bad('FUSION_SEARCH_API_KEY must be visible ASCII characters without spaces', 'FUSION_SEARCH_API_KEY');
  const config: SearchConfig = { provider: name, baseUrl, allowHosts, deadlineMs: SEARCH_DEADLINE_MS };
  if (apiKey !== undefined && apiKey !== '' && name === 'brave') {
    // Not enumerable: a logged or serialised config never carries the key.
    Object.defineProperty(config, 'apiKey', { value: apiKey, enumerable: false });
  }
  return config;
}
