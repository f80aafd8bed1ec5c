/**
 * Admin seam: static host overrides, like curl's `--resolve` (without the port part). An
 * override only replaces the DNS answer for one name; the address is still classified, so
 * `origin.test:10.0.0.5` is refused unless `allowCidrs` also names 10.0.0.5.
 *
 * Text form, one entry per override: `HOST:IP`. The host is a DNS name and cannot contain a
 * colon, so everything after the FIRST colon is the address; IPv6 may be bracketed or not:
 * `origin.test:127.0.0.2`, `origin.test:[::1]`, `origin.test:::1` (the last two are the same).
 * curl's `HOST:PORT:ADDR` form is deliberately not accepted: `host:2001:db8::1` would be
 * ambiguous. Hosts are compared after lowercasing and stripping trailing dots.
 */
import { isIP } from 'node:net';
import { FusionError } from '../errors.js';
import { isBlockedHostname, normalizeHostname } from '../contracts/source-url.js';

const DNS_LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/u;

function invalid(label: string, index: number | string, value: string, why: string): FusionError {
  const path = typeof index === 'number' ? `${label}[${String(index)}]` : `${label}[${JSON.stringify(index)}]`;
  return new FusionError('invalid_input', `${path} "${value}" is not a valid host override: ${why}`, { details: { path, value } });
}

/** Returns why `host` cannot be overridden, or undefined. Expects a normalised host. */
function hostProblem(host: string): string | undefined {
  if (host === '') return 'the host is empty';
  if (isIP(host) !== 0 || host.startsWith('[')) return 'the host is an IP literal (literals are never resolved, so there is nothing to override)';
  if (host.length > 253) return 'the host exceeds 253 characters';
  if (!host.split('.').every((part) => DNS_LABEL.test(part))) return 'the host is not a DNS name (letters, digits, "-", "_", dot-separated labels of 1-63 characters)';
  if (isBlockedHostname(host)) return 'localhost and metadata names are always blocked; an override cannot unblock them';
  return undefined;
}

/** Returns why `address` is not a usable override target, or undefined. */
function addressProblem(address: string): string | undefined {
  if (address === '') return 'the address is empty';
  if (address.includes('%')) return 'an IPv6 zone id is not allowed';
  if (isIP(address) === 0) return 'the address is not an IPv4 dotted quad or an IPv6 address (IPv6 as HOST:[::1] or HOST:::1)';
  return undefined;
}

/** Parses `["host:ip", …]` into a host → address map; throws invalid_input naming the entry. */
export function parseResolveList(entries: readonly string[], label = 'resolve'): Map<string, string> {
  const overrides = new Map<string, string>();
  entries.forEach((entry, index) => {
    if (typeof entry !== 'string') throw invalid(label, index, String(entry), 'not a string');
    const text = entry.trim();
    const colon = text.indexOf(':');
    if (colon < 0) throw invalid(label, index, entry, 'expected HOST:IP (IPv6 as HOST:[::1] or HOST:::1)');
    const host = normalizeHostname(text.slice(0, colon));
    let address = text.slice(colon + 1).trim();
    if (address.startsWith('[') && address.endsWith(']')) address = address.slice(1, -1);
    const problem = hostProblem(host) ?? addressProblem(address);
    if (problem !== undefined) throw invalid(label, index, entry, problem);
    if (overrides.has(host)) throw invalid(label, index, entry, `the host ${host} is overridden more than once`);
    overrides.set(host, address);
  });
  return overrides;
}

/** Validates and normalises a programmatic override map (same rules as the text form). */
export function normalizeOverrides(overrides: ReadonlyMap<string, string>, label = 'resolveOverrides'): Map<string, string> {
  const normalized = new Map<string, string>();
  for (const [rawHost, rawAddress] of overrides) {
    const host = normalizeHostname(String(rawHost).trim());
    let address = String(rawAddress).trim();
    if (address.startsWith('[') && address.endsWith(']')) address = address.slice(1, -1);
    const problem = hostProblem(host) ?? addressProblem(address);
    if (problem !== undefined) throw invalid(label, rawHost, `${rawHost}:${rawAddress}`, problem);
    if (normalized.has(host)) throw invalid(label, rawHost, `${rawHost}:${rawAddress}`, `the host ${host} is overridden more than once`);
    normalized.set(host, address);
  }
  return normalized;
}
