/**
 * Source declaration canonicalisation (docs/behaviour.md#e1). Pure: no DNS, no I/O. A declared source that
 * fails here is an input error, raised before any child, sandbox or run directory exists.
 *
 * The inner messages (`fusion research source URL …`) are the original implementation's
 * (pi-background-tasks, src/core/fusion/source-policy.ts, canonicalizeFusionPublicUrl); the
 * extra rejections below are this project's and reuse the same wording style.
 */
import { isIPv4 } from 'node:net';
import { classifyIp } from './address-class.js';

export type CanonicalSourceUrl = { ok: true; url: string; host: string } | { ok: false; reason: string };

/** Upper bound on the raw URL, in UTF-8 bytes (8 KiB). Longer text is rejected, not truncated. */
export const MAX_SOURCE_URL_BYTES = 8192;
/** DNS limits (RFC 1035): 63 octets per label, 253 for the dotted name without the root dot. */
export const MAX_DNS_LABEL_CHARS = 63;
export const MAX_DNS_HOST_CHARS = 253;

/** Cloud metadata service names (GCP, AWS, generic). Blocked by name before any DNS lookup. */
export const METADATA_HOSTNAMES: readonly string[] = Object.freeze([
  'metadata',
  'metadata.local',
  'metadata.google.internal',
  'metadata.goog',
  'instance-data',
  'instance-data.ec2.internal',
]);

/** Every exact name blocked by `isBlockedHostname`; any `*.localhost` name is blocked as well. */
export const BLOCKED_HOSTNAMES: readonly string[] = Object.freeze(['localhost', ...METADATA_HOSTNAMES]);

export const SOURCE_URL_MESSAGES = {
  malformedPrefix: 'fusion research declared source URL is malformed: ',
  credentials: 'fusion research source URL must not contain credentials',
  scheme: 'fusion research source URL must use http or https',
  blockedName: 'fusion research source URL must be public, not localhost/metadata',
  blockedAddress: 'fusion research source URL must be public, not private/reserved',
  tooLong: `fusion research source URL is longer than ${String(MAX_SOURCE_URL_BYTES)} bytes`,
  whitespace: 'fusion research source URL contains whitespace or control characters',
  backslash: 'fusion research source URL contains a backslash',
  zoneId: 'fusion research source URL host must not contain an IPv6 zone id',
  emptyHost: 'fusion research source URL host is empty',
  emptyLabel: 'fusion research source URL host has an empty label',
  labelTooLong: `fusion research source URL host label exceeds ${String(MAX_DNS_LABEL_CHARS)} characters`,
  hostTooLong: `fusion research source URL host exceeds ${String(MAX_DNS_HOST_CHARS)} characters`,
} as const;

/**
 * Whitespace, C0/C1 controls and invisible format characters (bidi overrides, zero-width joiners,
 * soft hyphen, BOM). WHATWG silently strips tabs/newlines and IDNA silently drops some format
 * characters, so the declared text and the fetched URL could differ; we refuse instead.
 */
const WHITESPACE_OR_CONTROL = /[\s\p{Cc}\p{Cf}]/u;

/** Lowercases and strips trailing dots (`example.com.` is `example.com`). */
export function normalizeHostname(host: string): string {
  return host.toLowerCase().replace(/\.+$/u, '');
}

/** True for localhost, *.localhost and the metadata names. Accepts un-normalised input. */
export function isBlockedHostname(host: string): boolean {
  const lower = normalizeHostname(host);
  return lower === 'localhost' || lower.endsWith('.localhost') || BLOCKED_HOSTNAMES.includes(lower);
}

function unbracket(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** Authority of the raw text (`scheme:[//]authority`), before WHATWG rewrites or rejects it. */
function rawAuthority(raw: string): string | undefined {
  return /^[a-z][a-z0-9+.-]*:\/*([^/?#]*)/iu.exec(raw)?.[1];
}

function fail(reason: string): CanonicalSourceUrl {
  return { ok: false, reason };
}

/** Checks a DNS name's shape; returns the failure message or undefined. */
function dnsShapeProblem(host: string): string | undefined {
  if (host.length === 0) return SOURCE_URL_MESSAGES.emptyHost;
  const labels = host.split('.');
  if (labels.some((label) => label.length === 0)) return SOURCE_URL_MESSAGES.emptyLabel;
  if (labels.some((label) => label.length > MAX_DNS_LABEL_CHARS)) return SOURCE_URL_MESSAGES.labelTooLong;
  if (host.length > MAX_DNS_HOST_CHARS) return SOURCE_URL_MESSAGES.hostTooLong;
  return undefined;
}

/**
 * docs/behaviour.md#e1 in order: parse → credentials → http(s) → drop fragment → lowercase host, strip
 * trailing dots, unbracket IPv6 → block localhost/metadata names → block non-public IP literals
 * → drop default ports. Query order is kept. Raw-text checks run before parsing because WHATWG
 * would otherwise repair (and so hide) them.
 */
export function canonicalizeSourceUrl(raw: string): CanonicalSourceUrl {
  if (typeof raw !== 'string') return fail(`${SOURCE_URL_MESSAGES.malformedPrefix}not a string`);
  if (Buffer.byteLength(raw, 'utf8') > MAX_SOURCE_URL_BYTES) return fail(SOURCE_URL_MESSAGES.tooLong);
  if (WHITESPACE_OR_CONTROL.test(raw)) return fail(SOURCE_URL_MESSAGES.whitespace);
  // WHATWG reads `\` as `/` in http(s) URLs; other parsers do not, which invites host confusion.
  if (raw.includes('\\')) return fail(SOURCE_URL_MESSAGES.backslash);
  const authority = rawAuthority(raw);
  if (authority !== undefined) {
    const bracket = authority.indexOf('[');
    if (bracket >= 0 && authority.indexOf('%', bracket) > bracket) return fail(SOURCE_URL_MESSAGES.zoneId);
  }

  let url: URL;
  try {
    url = new URL(raw);
  } catch (error) {
    return fail(`${SOURCE_URL_MESSAGES.malformedPrefix}${error instanceof Error ? error.message : String(error)}`);
  }
  if (url.username !== '' || url.password !== '') return fail(SOURCE_URL_MESSAGES.credentials);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return fail(SOURCE_URL_MESSAGES.scheme);
  url.hash = '';

  // WHATWG already lowercased, IDNA-mapped, percent-decoded the host and turned numeric shorthand
  // (`2130706433`, `0x7f.1`, `127.1`) into dotted quads, so the parsed host is what gets judged.
  const bracketed = url.hostname.startsWith('[');
  const host = bracketed ? unbracket(url.hostname).toLowerCase() : normalizeHostname(url.hostname);
  if (!bracketed) {
    const problem = dnsShapeProblem(host);
    if (problem !== undefined) return fail(problem);
    if (host !== url.hostname) url.hostname = host;
  }
  if (isBlockedHostname(host)) return fail(SOURCE_URL_MESSAGES.blockedName);
  if (bracketed || isIPv4(host)) {
    if (!classifyIp(host).public) return fail(SOURCE_URL_MESSAGES.blockedAddress);
  }
  if ((url.protocol === 'http:' && url.port === '80') || (url.protocol === 'https:' && url.port === '443')) {
    url.port = '';
  }
  return { ok: true, url: url.toString(), host };
}
