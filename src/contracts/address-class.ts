/**
 * The one pure address classifier (docs/behaviour.md#e3 deny lists), shared by source declaration
 * (source-url.ts) and the host-side guarded fetch. No I/O: it judges a literal address only.
 *
 * Security decisions, each deliberate:
 * - Input must be a strict literal: dotted-quad IPv4 (no inet_aton shorthand such as `127.1`,
 *   `0x7f.1` or `2130706433`, no leading zeros) or a standard IPv6 text form. DNS answers and
 *   WHATWG-parsed hosts are always canonical, so anything else is suspicious and is not public.
 * - An IPv6 zone id (`fe80::1%eth0`) is never public: it names a local interface.
 * - IPv6 prefixes that embed an IPv4 address (mapped, compatible, translated, NAT64, 6to4,
 *   Teredo) are denied as whole prefixes, whatever they embed: a public embedded address could
 *   still be translated by a local gateway into something we cannot see. The reason names the
 *   embedded address and how that address alone would be judged, so logs explain the block.
 * - Global IPv6 unicast is only ever allocated from 2000::/3; anything outside it that no
 *   specific entry names is denied too (catch-all), rather than silently treated as public.
 */
import ipaddr from 'ipaddr.js';
import { isIP } from 'node:net';
import { FusionError } from '../errors.js';

export type IpClassification =
  | { public: true; allowedBy?: string }
  | { public: false; reason: string; range: string; embeddedIpv4?: string };

export interface ClassifyIpOptions {
  /** Admin seam: CIDRs treated as public (corporate proxy, tests). Checked before the deny lists. */
  allowCidrs?: readonly string[];
}

/** A validated CIDR: the parsed network address, its prefix length and the text it came from. */
export interface ParsedCidr {
  readonly address: ipaddr.IPv4 | ipaddr.IPv6;
  readonly prefixLength: number;
  readonly text: string;
}

interface DenyEntry {
  readonly cidr: string;
  readonly reason: string;
  readonly parsed: [ipaddr.IPv4 | ipaddr.IPv6, number];
  /** Extracts the IPv4 address the prefix embeds, for the reason text. */
  readonly embedded?: (address: ipaddr.IPv6) => ipaddr.IPv4;
}

function entry(cidr: string, reason: string, embedded?: (address: ipaddr.IPv6) => ipaddr.IPv4): DenyEntry {
  const parsed = ipaddr.parseCIDR(cidr);
  return embedded === undefined ? { cidr, reason, parsed } : { cidr, reason, parsed, embedded };
}

function v4FromWords(high: number, low: number): ipaddr.IPv4 {
  return new ipaddr.IPv4([(high >> 8) & 0xff, high & 0xff, (low >> 8) & 0xff, low & 0xff]);
}

function word(address: ipaddr.IPv6, index: number): number {
  return address.parts[index] ?? 0;
}

/** Last 32 bits (mapped, compatible, translated, NAT64 /96). */
const lastThirtyTwoBits = (a: ipaddr.IPv6): ipaddr.IPv4 => v4FromWords(word(a, 6), word(a, 7));
/** 6to4 (RFC 3056): 2002:AABB:CCDD::/48 embeds AA.BB.CC.DD in bits 16-48. */
const sixToFourBits = (a: ipaddr.IPv6): ipaddr.IPv4 => v4FromWords(word(a, 1), word(a, 2));
/** Teredo (RFC 4380): the client's public IPv4 is the last 32 bits XORed with 0xffffffff. */
const teredoClientBits = (a: ipaddr.IPv6): ipaddr.IPv4 => v4FromWords(word(a, 6) ^ 0xffff, word(a, 7) ^ 0xffff);

/** docs/behaviour.md#e3 IPv4 deny list, with the entries it lists as beyond the original. Specific entries precede the ranges holding them. */
const IPV4_DENY: readonly DenyEntry[] = [
  entry('0.0.0.0/8', 'this network (unspecified)'),
  entry('10.0.0.0/8', 'private network'),
  entry('100.64.0.0/10', 'shared address space (carrier-grade NAT)'),
  entry('127.0.0.0/8', 'loopback'),
  entry('169.254.0.0/16', 'link-local (cloud metadata)'),
  entry('172.16.0.0/12', 'private network'),
  entry('192.0.0.0/24', 'IETF protocol assignments'),
  entry('192.0.2.0/24', 'documentation (TEST-NET-1)'),
  entry('192.168.0.0/16', 'private network'),
  entry('198.18.0.0/15', 'benchmarking'),
  entry('198.51.100.0/24', 'documentation (TEST-NET-2)'),
  entry('203.0.113.0/24', 'documentation (TEST-NET-3)'),
  entry('224.0.0.0/4', 'multicast'),
  entry('255.255.255.255/32', 'limited broadcast'),
  entry('240.0.0.0/4', 'reserved'),
  // Beyond the original (docs/behaviour.md#e3): it let these through at transport level.
  entry('168.63.129.16/32', 'Azure platform endpoint (wireserver)'),
  entry('192.88.99.0/24', '6to4 relay anycast'),
];

/** docs/behaviour.md#e3 IPv6 deny list, with the entries it lists as beyond the original. Specific entries precede the ranges holding them. */
const IPV6_DENY: readonly DenyEntry[] = [
  entry('::/128', 'unspecified'),
  entry('::1/128', 'loopback'),
  entry('::ffff:0:0/96', 'IPv4-mapped', lastThirtyTwoBits),
  entry('::ffff:0:0:0/96', 'IPv4-translated', lastThirtyTwoBits),
  entry('::/96', 'IPv4-compatible', lastThirtyTwoBits),
  entry('64:ff9b::/96', 'NAT64', lastThirtyTwoBits),
  entry('64:ff9b:1::/48', 'local-use NAT64'),
  entry('100::/64', 'discard-only'),
  entry('2001::/32', 'Teredo', teredoClientBits),
  entry('2001:2::/48', 'benchmarking'),
  entry('2001:db8::/32', 'documentation'),
  entry('2002::/16', '6to4', sixToFourBits),
  entry('3fff::/20', 'documentation (RFC 9637)'),
  entry('fd00:ec2::254/128', 'AWS metadata endpoint'),
  entry('fc00::/7', 'unique local'),
  entry('fec0::/10', 'site-local (deprecated)'),
  entry('fe80::/10', 'link-local'),
  entry('ff00::/8', 'multicast'),
];

const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/** Parses a strict literal, or returns the reason it is not one. */
function parseStrict(address: string): ipaddr.IPv4 | ipaddr.IPv6 | { reason: string } {
  if (address.includes('%')) return { reason: 'IPv6 zone id is not allowed' };
  // node:net's isIP is strict (no shorthand, no leading zeros); ipaddr.js alone accepts inet_aton forms.
  const family = isIP(address);
  if (family === 4 && ipaddr.IPv4.isValidFourPartDecimal(address)) return ipaddr.IPv4.parse(address);
  if (family === 6) {
    const hex = dottedTailToHex(address);
    if (ipaddr.IPv6.isValid(hex)) return ipaddr.IPv6.parse(hex);
  }
  return { reason: 'not a valid IP address literal' };
}

/**
 * Rewrites a trailing dotted quad as two hex words (`::127.0.0.1` → `::7f00:1`). ipaddr.js parses
 * the deprecated `::a.b.c.d` form as IPv4-*mapped* (`::ffff:a.b.c.d`); RFC 4291, node:net and
 * WHATWG read it as IPv4-compatible (`::a.b.c.d`). Only called after node:net accepted the text,
 * so the tail is a strict dotted quad.
 */
function dottedTailToHex(address: string): string {
  const match = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/u.exec(address);
  if (match === null) return address;
  const [a, b, c, d] = [match[2], match[3], match[4], match[5]].map(Number) as [number, number, number, number];
  return `${match[1] ?? ''}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
}

function matches(address: ipaddr.IPv4 | ipaddr.IPv6, range: [ipaddr.IPv4 | ipaddr.IPv6, number]): boolean {
  return address.kind() === range[0].kind() && address.match(range);
}

function denyV4(address: ipaddr.IPv4): DenyEntry | undefined {
  return IPV4_DENY.find((candidate) => matches(address, candidate.parsed));
}

/**
 * Validates a list of CIDR strings (`a.b.c.d/n` dotted quad, or IPv6 `/n` without zone id).
 * Host bits must be zero so a typo such as `10.0.0.1/8` is caught instead of silently widened.
 */
export function parseCidrList(entries: readonly string[], label = 'allowCidrs'): ParsedCidr[] {
  return entries.map((text, index) => {
    const fail = (why: string): never => {
      throw new FusionError('invalid_input', `${label}[${String(index)}] "${text}" is not a valid CIDR: ${why}`, {
        details: { path: `${label}[${String(index)}]`, value: text },
      });
    };
    if (typeof text !== 'string') return fail('not a string');
    const match = /^([^/]+)\/(0|[1-9]\d{0,2})$/.exec(text);
    if (match === null) return fail('expected <address>/<prefix length>');
    const addressText = match[1] ?? '';
    const prefixLength = Number(match[2]);
    const parsed = parseStrict(addressText);
    if ('reason' in parsed) return fail(parsed.reason);
    const maxLength = parsed.kind() === 'ipv4' ? 32 : 128;
    if (prefixLength > maxLength) return fail(`prefix length exceeds ${String(maxLength)}`);
    const normalized = `${parsed.toString()}/${String(prefixLength)}`;
    const network = parsed.kind() === 'ipv4'
      ? ipaddr.IPv4.networkAddressFromCIDR(normalized)
      : ipaddr.IPv6.networkAddressFromCIDR(normalized);
    if (network.toString() !== parsed.toString()) {
      return fail(`host bits are set (network address is ${network.toString()})`);
    }
    return { address: parsed, prefixLength, text };
  });
}

/**
 * Judges one literal address. Public means: parseable, no zone id, inside no deny range (or inside
 * an `allowCidrs` range). Throws FusionError invalid_input only for a malformed `allowCidrs` entry.
 */
export function classifyIp(address: string, options: ClassifyIpOptions = {}): IpClassification {
  const parsed = parseStrict(address);
  if ('reason' in parsed) {
    return { public: false, reason: parsed.reason, range: parsed.reason.startsWith('IPv6 zone') ? 'zone-id' : 'unparseable' };
  }
  if (options.allowCidrs !== undefined && options.allowCidrs.length > 0) {
    const allowed = parseCidrList(options.allowCidrs).find((cidr) => matches(parsed, [cidr.address, cidr.prefixLength]));
    if (allowed !== undefined) return { public: true, allowedBy: allowed.text };
  }
  if (parsed.kind() === 'ipv4') {
    const hit = denyV4(parsed as ipaddr.IPv4);
    return hit === undefined ? { public: true } : { public: false, reason: hit.reason, range: hit.cidr };
  }
  const v6 = parsed as ipaddr.IPv6;
  const hit = IPV6_DENY.find((candidate) => matches(v6, candidate.parsed));
  if (hit !== undefined) {
    if (hit.embedded === undefined) return { public: false, reason: hit.reason, range: hit.cidr };
    const embedded = hit.embedded(v6);
    const inner = denyV4(embedded);
    const verdict = inner === undefined ? 'public on its own' : `${inner.reason} ${inner.cidr}`;
    return {
      public: false,
      reason: `${hit.reason} prefix embeds IPv4 ${embedded.toString()} (${verdict}); the whole prefix is denied`,
      range: hit.cidr,
      embeddedIpv4: embedded.toString(),
    };
  }
  if (!v6.match(GLOBAL_UNICAST_V6)) return { public: false, reason: 'outside IPv6 global unicast 2000::/3', range: 'outside 2000::/3' };
  return { public: true };
}

/** Convenience for callers that only need the verdict. */
export function isPublicIp(address: string, options: ClassifyIpOptions = {}): boolean {
  return classifyIp(address, options).public;
}

/**
 * An IP literal as a host, a listen address or a socket peer spells it: IPv6 may be bracketed
 * (`[::1]`, as in URLs) and may carry a zone id (`fe80::1%eth0`, as sockets report link-local
 * peers). The address itself is parsed as strictly as `classifyIp` does, so an inet_aton
 * shorthand (`127.1`) is not an address here either.
 */
export interface AddressLiteral {
  readonly address: ipaddr.IPv4 | ipaddr.IPv6;
  readonly zoneId?: string;
}

/** The literal `text` holds, or undefined when it is not one (a name, a malformed address). */
export function parseAddressLiteral(text: string): AddressLiteral | undefined {
  const bracketed = text.startsWith('[') && text.endsWith(']');
  const inner = bracketed ? text.slice(1, -1) : text;
  const at = inner.indexOf('%');
  const bare = at === -1 ? inner : inner.slice(0, at);
  // Brackets and zone ids belong to IPv6 only.
  if ((bracketed || at !== -1) && isIP(bare) !== 6) return undefined;
  if (at !== -1 && at === inner.length - 1) return undefined;
  const parsed = parseStrict(bare);
  if ('reason' in parsed) return undefined;
  return at === -1 ? { address: parsed } : { address: parsed, zoneId: inner.slice(at + 1) };
}

/**
 * The address an IPv4-mapped IPv6 address stands for (`::ffff:127.0.0.1` is 127.0.0.1 on the wire
 * of a dual-stack socket); any other address as it is. IPv4-compatible `::a.b.c.d` is not mapped.
 */
function unmapped(address: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  return address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress() ? (address as ipaddr.IPv6).toIPv4Address() : address;
}

/** Loopback: 127.0.0.0/8, ::1, and either as an IPv4-mapped IPv6 address; a zone id does not matter. */
export function isLoopbackAddress(text: string): boolean {
  const literal = parseAddressLiteral(text);
  return literal !== undefined && unmapped(literal.address).range() === 'loopback';
}

/**
 * This machine or its local network: loopback, private IPv4 (10/8, 172.16/12, 192.168/16),
 * IPv6 unique local (fc00::/7) and link-local (169.254/16, fe80::/10), IPv4-mapped ones included.
 * Not a security boundary (the egress guard judges with `classifyIp`): it tells where a
 * configured service is likely to run.
 */
export function isLocalNetworkAddress(text: string): boolean {
  const literal = parseAddressLiteral(text);
  if (literal === undefined) return false;
  return ['loopback', 'private', 'uniqueLocal', 'linkLocal'].includes(unmapped(literal.address).range());
}

/**
 * One spelling per address, for comparing two of them: the family, the full normalised form and
 * the zone id (`ipv6:0:0:0:0:0:0:0:1`). An IPv4-mapped address stays IPv6: it is another peer
 * than the IPv4 one as far as a socket is concerned. Undefined when `text` is not a literal.
 */
export function canonicalAddress(text: string): string | undefined {
  const literal = parseAddressLiteral(text);
  if (literal === undefined) return undefined;
  return `${literal.address.kind()}:${literal.address.toNormalizedString()}${literal.zoneId === undefined ? '' : `%${literal.zoneId}`}`;
}

/**
 * The unit one client is counted in: an IPv4 address as it is (an IPv4-mapped one too), an IPv6
 * address by its /64 (one host usually holds a whole /64, so counting single addresses would let
 * it rotate through them). Undefined when `text` is not a literal.
 */
export function addressUnit(text: string): string | undefined {
  const literal = parseAddressLiteral(text);
  if (literal === undefined) return undefined;
  const address = unmapped(literal.address);
  if (address.kind() === 'ipv4') return address.toString();
  return `${(address as ipaddr.IPv6).parts.slice(0, 4).map((p) => p.toString(16)).join(':')}::/64`;
}
