/**
 * URL rules of the guarded fetch (docs/behaviour.md#e3), in the spec's order: trim → parse (`invalid_url`)
 * → http(s) only (`unsupported_scheme`, checked before credentials) → credentials (`invalid_url`)
 * → empty host (`invalid_url`) → strip fragment → lowercase host, strip trailing dots, unbracket
 * IPv6. Host *policy* (names, literals, DNS) is host-vetting.ts's job; this file only shapes.
 *
 * On a redirect hop every failure here is `redirect_blocked`: the origin, not the caller, chose
 * that URL, so an unparsable Location, a scheme change (e.g. to ftp:) or credentials in it are
 * all "a redirect pointed somewhere we will not go". That is the documented choice for a
 * redirect to a non-http(s) scheme (rather than `unsupported_scheme`).
 *
 * The canonical form equals `canonicalizeSourceUrl` (src/contracts/source-url.ts) for every URL
 * both accept, so the result's `url` matches the declared source text; a test pins that.
 */
import { isIP } from 'node:net';
import { FusionError, type ErrorCode } from '../errors.js';
import { normalizeHostname } from '../contracts/source-url.js';

export interface FetchTarget {
  /** The URL that is requested: fragment stripped, host normalised, default port dropped. */
  readonly url: URL;
  /** `url.href`: the canonical text reported as `url` / `final_url`. */
  readonly canonical: string;
  /** Lowercase hostname, trailing dots stripped, IPv6 without brackets. */
  readonly host: string;
  /** 4 or 6 when the host is an IP literal (DNS is skipped), else 0. */
  readonly ipFamily: 0 | 4 | 6;
}

function failure(hop: number, code: ErrorCode, message: string, details: Record<string, unknown> = {}): FusionError {
  if (hop === 0) return new FusionError(code, message, { details });
  return new FusionError('redirect_blocked', `redirect ${String(hop)} blocked: ${message}`, { details: { ...details, hop, rule: code } });
}

/**
 * Shapes one hop's URL or throws the hop's typed error. `base` resolves a relative Location
 * header (redirect hops only).
 */
export function parseFetchUrl(raw: string, hop = 0, base?: URL): FetchTarget {
  if (typeof raw !== 'string') throw failure(hop, 'invalid_url', 'fetch URL is malformed: not a string');
  const text = raw.trim();
  let url: URL;
  try {
    url = base === undefined ? new URL(text) : new URL(text, base);
  } catch (error) {
    throw failure(hop, 'invalid_url', `fetch URL is malformed: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw failure(hop, 'unsupported_scheme', `fetch URL scheme ${JSON.stringify(url.protocol.replace(/:$/u, ''))} is not supported; only http and https are`, {
      scheme: url.protocol.replace(/:$/u, ''),
    });
  }
  if (url.username !== '' || url.password !== '') throw failure(hop, 'invalid_url', 'fetch URL must not contain credentials');
  if (url.hostname === '') throw failure(hop, 'invalid_url', 'fetch URL host is empty');
  url.hash = '';

  const bracketed = url.hostname.startsWith('[') && url.hostname.endsWith(']');
  const host = bracketed ? url.hostname.slice(1, -1).toLowerCase() : normalizeHostname(url.hostname);
  if (host === '') throw failure(hop, 'invalid_url', 'fetch URL host is empty');
  // WHATWG already lowercased the host and rewrote numeric IPv4 shorthand (`2130706433`,
  // `0x7f.1`, `127.1`) as a dotted quad; only trailing dots remain to strip.
  if (!bracketed && host !== url.hostname) url.hostname = host;
  const family = isIP(host);
  return { url, canonical: url.href, host, ipFamily: family === 4 || family === 6 ? family : 0 };
}
