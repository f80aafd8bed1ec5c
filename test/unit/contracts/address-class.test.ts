import { describe, it, expect } from 'vitest';
import { addressUnit, canonicalAddress, classifyIp, isLocalNetworkAddress, isLoopbackAddress, isPublicIp, parseAddressLiteral, parseCidrList } from '../../../src/contracts/address-class.js';
import { FusionError } from '../../../src/errors.js';

/** [address, expected deny range or 'public']. */
type Row = readonly [string, string];

const IPV4_TABLE: readonly Row[] = [
  ['0.0.0.0', '0.0.0.0/8'], ['0.255.255.255', '0.0.0.0/8'], ['1.0.0.0', 'public'],
  ['9.255.255.255', 'public'], ['10.0.0.0', '10.0.0.0/8'], ['10.255.255.255', '10.0.0.0/8'], ['11.0.0.0', 'public'],
  ['100.63.255.255', 'public'], ['100.64.0.0', '100.64.0.0/10'], ['100.127.255.255', '100.64.0.0/10'], ['100.128.0.0', 'public'],
  ['126.255.255.255', 'public'], ['127.0.0.0', '127.0.0.0/8'], ['127.0.0.1', '127.0.0.0/8'], ['127.255.255.255', '127.0.0.0/8'], ['128.0.0.0', 'public'],
  ['169.253.255.255', 'public'], ['169.254.0.0', '169.254.0.0/16'], ['169.254.169.254', '169.254.0.0/16'], ['169.254.255.255', '169.254.0.0/16'], ['169.255.0.0', 'public'],
  ['172.15.255.255', 'public'], ['172.16.0.0', '172.16.0.0/12'], ['172.31.255.255', '172.16.0.0/12'], ['172.32.0.0', 'public'],
  ['191.255.255.255', 'public'], ['192.0.0.0', '192.0.0.0/24'], ['192.0.0.255', '192.0.0.0/24'], ['192.0.1.0', 'public'],
  ['192.0.1.255', 'public'], ['192.0.2.0', '192.0.2.0/24'], ['192.0.2.255', '192.0.2.0/24'], ['192.0.3.0', 'public'],
  ['192.167.255.255', 'public'], ['192.168.0.0', '192.168.0.0/16'], ['192.168.255.255', '192.168.0.0/16'], ['192.169.0.0', 'public'],
  ['198.17.255.255', 'public'], ['198.18.0.0', '198.18.0.0/15'], ['198.19.255.255', '198.18.0.0/15'], ['198.20.0.0', 'public'],
  ['198.51.99.255', 'public'], ['198.51.100.0', '198.51.100.0/24'], ['198.51.100.255', '198.51.100.0/24'], ['198.51.101.0', 'public'],
  ['203.0.112.255', 'public'], ['203.0.113.0', '203.0.113.0/24'], ['203.0.113.255', '203.0.113.0/24'], ['203.0.114.0', 'public'],
  ['223.255.255.255', 'public'], ['224.0.0.0', '224.0.0.0/4'], ['239.255.255.255', '224.0.0.0/4'],
  ['240.0.0.0', '240.0.0.0/4'], ['255.255.255.254', '240.0.0.0/4'], ['255.255.255.255', '255.255.255.255/32'],
  // Entries beyond the original (docs/behaviour.md#e3).
  ['168.63.129.15', 'public'], ['168.63.129.16', '168.63.129.16/32'], ['168.63.129.17', 'public'],
  ['192.88.98.255', 'public'], ['192.88.99.0', '192.88.99.0/24'], ['192.88.99.255', '192.88.99.0/24'], ['192.88.100.0', 'public'],
  // Ordinary public addresses.
  ['8.8.8.8', 'public'], ['93.184.216.34', 'public'], ['1.1.1.1', 'public'],
];

const CATCH_ALL = 'outside 2000::/3';

const IPV6_TABLE: readonly Row[] = [
  ['::', '::/128'], ['::1', '::1/128'], ['::2', '::/96'], ['::ffff:ffff', '::/96'], ['::1:0:0', CATCH_ALL],
  ['::ffff:0:0', '::ffff:0:0/96'], ['::ffff:ffff:ffff', '::ffff:0:0/96'], ['::1:0:0:0', CATCH_ALL],
  ['::ffff:0:0:0', '::ffff:0:0:0/96'], ['::ffff:0:ffff:ffff', '::ffff:0:0:0/96'],
  ['64:ff9b::', '64:ff9b::/96'], ['64:ff9b::ffff:ffff', '64:ff9b::/96'], ['64:ff9b::1:0:0', CATCH_ALL],
  ['64:ff9b:1::', '64:ff9b:1::/48'], ['64:ff9b:1:ffff:ffff:ffff:ffff:ffff', '64:ff9b:1::/48'], ['64:ff9b:2::', CATCH_ALL],
  ['100::', '100::/64'], ['100::ffff:ffff:ffff:ffff', '100::/64'], ['100:0:0:1::', CATCH_ALL],
  ['1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', CATCH_ALL], ['2000::', 'public'],
  ['2001::', '2001::/32'], ['2001:0:ffff:ffff:ffff:ffff:ffff:ffff', '2001::/32'], ['2001:1::', 'public'],
  ['2001:1:ffff:ffff:ffff:ffff:ffff:ffff', 'public'], ['2001:2::', '2001:2::/48'], ['2001:2:0:ffff:ffff:ffff:ffff:ffff', '2001:2::/48'], ['2001:2:1::', 'public'],
  ['2001:db7:ffff:ffff:ffff:ffff:ffff:ffff', 'public'], ['2001:db8::', '2001:db8::/32'], ['2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', '2001:db8::/32'], ['2001:db9::', 'public'],
  ['2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'public'], ['2002::', '2002::/16'], ['2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff', '2002::/16'], ['2003::', 'public'],
  ['3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'public'], ['3fff::', '3fff::/20'], ['3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff', '3fff::/20'], ['3fff:1000::', 'public'],
  ['3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'public'], ['4000::', CATCH_ALL],
  ['fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', CATCH_ALL], ['fc00::', 'fc00::/7'], ['fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'fc00::/7'], ['fe00::', CATCH_ALL],
  ['fd00:ec2::254', 'fd00:ec2::254/128'], ['fd00:ec2::253', 'fc00::/7'], ['fd00:ec2::255', 'fc00::/7'],
  ['fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff', CATCH_ALL], ['fe80::', 'fe80::/10'], ['fe80::1', 'fe80::/10'], ['febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'fe80::/10'],
  ['fec0::', 'fec0::/10'], ['feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'fec0::/10'],
  ['ff00::', 'ff00::/8'], ['ff02::1', 'ff00::/8'], ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ff00::/8'],
  // Ordinary public addresses, in several spellings.
  ['2606:4700:4700::1111', 'public'], ['2001:4860:4860::8888', 'public'], ['2001:4860:4860:0:0:0:0:8888', 'public'],
  ['2A00:1450:4001:82B::200E', 'public'],
];

describe('classifyIp deny table', () => {
  it.each(IPV4_TABLE)('IPv4 %s → %s', (address, expected) => {
    const verdict = classifyIp(address);
    if (expected === 'public') expect(verdict).toEqual({ public: true });
    else expect(verdict).toMatchObject({ public: false, range: expected });
    expect(isPublicIp(address)).toBe(expected === 'public');
  });

  it.each(IPV6_TABLE)('IPv6 %s → %s', (address, expected) => {
    const verdict = classifyIp(address);
    if (expected === 'public') expect(verdict).toEqual({ public: true });
    else expect(verdict).toMatchObject({ public: false, range: expected });
  });

  it('gives a readable reason for every denial', () => {
    expect(classifyIp('127.0.0.1')).toEqual({ public: false, reason: 'loopback', range: '127.0.0.0/8' });
    expect(classifyIp('168.63.129.16')).toMatchObject({ reason: expect.stringContaining('Azure') });
    expect(classifyIp('fd00:ec2::254')).toMatchObject({ reason: expect.stringContaining('metadata') });
  });
});

describe('classifyIp IPv4 embedded in IPv6', () => {
  /** [address, prefix, embedded IPv4, embedded would be public on its own]. */
  const rows: readonly (readonly [string, string, string, boolean])[] = [
    ['::ffff:127.0.0.1', '::ffff:0:0/96', '127.0.0.1', false],
    ['::ffff:7f00:1', '::ffff:0:0/96', '127.0.0.1', false],
    ['::FFFF:7F00:1', '::ffff:0:0/96', '127.0.0.1', false],
    ['::ffff:10.1.2.3', '::ffff:0:0/96', '10.1.2.3', false],
    ['::ffff:8.8.8.8', '::ffff:0:0/96', '8.8.8.8', true],
    // Regression: ipaddr.js alone parses `::a.b.c.d` as IPv4-mapped; it is IPv4-compatible.
    ['::127.0.0.1', '::/96', '127.0.0.1', false],
    ['::8.8.8.8', '::/96', '8.8.8.8', true],
    ['::ffff:0:10.0.0.1', '::ffff:0:0:0/96', '10.0.0.1', false],
    ['::ffff:0:8.8.8.8', '::ffff:0:0:0/96', '8.8.8.8', true],
    ['64:ff9b::10.0.0.1', '64:ff9b::/96', '10.0.0.1', false],
    ['64:ff9b::a9fe:a9fe', '64:ff9b::/96', '169.254.169.254', false],
    ['64:ff9b::8.8.8.8', '64:ff9b::/96', '8.8.8.8', true],
    ['2002:c0a8:101::1', '2002::/16', '192.168.1.1', false],
    ['2002:7f00:1::', '2002::/16', '127.0.0.1', false],
    ['2002:808:808::1', '2002::/16', '8.8.8.8', true],
    // RFC 4380 §4 example: client 192.0.2.45 behind server 65.54.227.120.
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', '2001::/32', '192.0.2.45', false],
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', '2001::/32', '127.0.0.1', false],
    ['2001:0:4136:e378::f7f7:f7f7', '2001::/32', '8.8.8.8', true],
  ];

  it.each(rows)('%s is blocked as %s and names %s', (address, prefix, embedded, embeddedPublic) => {
    const verdict = classifyIp(address);
    expect(verdict).toMatchObject({ public: false, range: prefix, embeddedIpv4: embedded });
    if (verdict.public) throw new Error('unreachable');
    expect(verdict.reason).toContain(embedded);
    const inner = classifyIp(embedded);
    expect(inner.public).toBe(embeddedPublic);
    // The reason says how the embedded address alone would be judged.
    expect(verdict.reason).toContain(inner.public ? 'public on its own' : inner.range);
  });

  it('has no embedded address for local-use NAT64', () => {
    expect(classifyIp('64:ff9b:1::808:808')).toEqual({ public: false, reason: 'local-use NAT64', range: '64:ff9b:1::/48' });
  });
});

describe('classifyIp rejects anything that is not a strict literal', () => {
  it.each([
    'fe80::1%eth0', 'fe80::1%25eth0', '2606:4700:4700::1111%1', '::1%lo', 'fe80::1%',
  ])('zone id %s is not public', (address) => {
    expect(classifyIp(address)).toMatchObject({ public: false, range: 'zone-id' });
  });

  it.each([
    '', ' ', 'localhost', 'example.com', '127.1', '0x7f.0.0.1', '0x7f000001', '2130706433', '017700000001',
    '01.2.3.4', '8.8.8.08', '1.2.3.256', '1.2.3', '1.2.3.4.5', ' 8.8.8.8', '8.8.8.8 ', '8.8.8.8\n',
    '8.8.8.8/32', '[::1]', '[2606:4700::1111]', '::ffff:127.1', '::ffff:0x7f.0.0.1', '1::2::3', ':::',
    '2606:4700:4700:0:0:0:0:0:1111', 'gggg::1', '１.１.１.１',
  ])('garbage %j is not public', (address) => {
    expect(classifyIp(address)).toMatchObject({ public: false, range: 'unparseable' });
  });
});

describe('allowCidrs admin seam', () => {
  it('makes exactly the allowed addresses public', () => {
    const options = { allowCidrs: ['127.0.0.2/32'] };
    expect(classifyIp('127.0.0.2', options)).toEqual({ public: true, allowedBy: '127.0.0.2/32' });
    expect(classifyIp('127.0.0.1', options)).toEqual({ public: false, reason: 'loopback', range: '127.0.0.0/8' });
    expect(classifyIp('127.0.0.3', options).public).toBe(false);
  });

  it('works for IPv6 and does not cross families', () => {
    const options = { allowCidrs: ['10.0.0.0/8', 'fd00::/8'] };
    expect(classifyIp('10.20.30.40', options).public).toBe(true);
    expect(classifyIp('fd12:3456::1', options).public).toBe(true);
    expect(classifyIp('fc00::1', options).public).toBe(false);
    expect(classifyIp('::ffff:10.0.0.1', options).public).toBe(false);
  });

  it('never rescues unparseable input or zone ids', () => {
    const options = { allowCidrs: ['fe80::/10', '127.0.0.0/8'] };
    expect(classifyIp('fe80::1%eth0', options).public).toBe(false);
    expect(classifyIp('127.1', options).public).toBe(false);
    expect(classifyIp('fe80::1', options).public).toBe(true);
  });

  it('an empty list changes nothing', () => {
    expect(classifyIp('127.0.0.1', { allowCidrs: [] }).public).toBe(false);
  });
});

describe('parseCidrList', () => {
  it('parses valid IPv4 and IPv6 CIDRs', () => {
    const parsed = parseCidrList(['127.0.0.2/32', '10.0.0.0/8', '0.0.0.0/0', 'fd00::/8', '::/0', '2001:db8::1/128']);
    expect(parsed.map((cidr) => [cidr.text, cidr.prefixLength, cidr.address.kind()])).toEqual([
      ['127.0.0.2/32', 32, 'ipv4'], ['10.0.0.0/8', 8, 'ipv4'], ['0.0.0.0/0', 0, 'ipv4'],
      ['fd00::/8', 8, 'ipv6'], ['::/0', 0, 'ipv6'], ['2001:db8::1/128', 128, 'ipv6'],
    ]);
  });

  it.each([
    '10.0.0.0', '10.0.0.1/8', '10.0.0.0/33', '10.0.0.0/08', '10.0.0.0/-1', '10/8', '127.1/32', '0x7f.0.0.0/8',
    'nope/8', '', '/8', '::/129', 'fe80::%eth0/64', 'fe80::1/10', ' 10.0.0.0/8', '10.0.0.0/8 ',
  ])('rejects %j with invalid_input naming the entry', (bad) => {
    let caught: unknown;
    try {
      parseCidrList(['8.8.8.0/24', bad]);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(FusionError);
    const error = caught as FusionError;
    expect(error.code).toBe('invalid_input');
    expect(error.message).toContain(`allowCidrs[1] "${bad}"`);
    expect(error.details).toMatchObject({ path: 'allowCidrs[1]', value: bad });
  });

  it('uses the caller label and throws from classifyIp on a bad allow entry', () => {
    expect(() => parseCidrList(['x'], 'egress.allowCidrs')).toThrow(/^egress\.allowCidrs\[0\] "x" is not a valid CIDR/);
    expect(() => classifyIp('8.8.8.8', { allowCidrs: ['10.0.0.1/8'] })).toThrow(/host bits are set/);
  });
});

describe('parseAddressLiteral: hosts, listen addresses and socket peers', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1', undefined],
    ['::1', '::1', undefined],
    ['[::1]', '::1', undefined],
    ['fe80::1%eth0', 'fe80::1', 'eth0'],
    ['[fe80::1%25eth0]', 'fe80::1', '25eth0'],
    ['::ffff:127.0.0.1', '::ffff:7f00:1', undefined],
  ])('%s is a literal', (text, address, zone) => {
    const literal = parseAddressLiteral(text);
    expect(literal?.address.toString()).toBe(address);
    expect(literal?.zoneId).toBe(zone);
  });

  it.each(['localhost', '127.1', '0x7f.0.0.1', '2130706433', '127.000.0.1', '[127.0.0.1]', '127.0.0.1%eth0', '::1%', '[::1', '', 'example.com'])('%j is not', (text) => {
    expect(parseAddressLiteral(text)).toBeUndefined();
  });
});

describe('isLoopbackAddress', () => {
  it.each(['127.0.0.1', '127.255.255.254', '127.1.2.3', '::1', '[::1]', '::1%lo', '::ffff:127.0.0.1', '[::ffff:127.0.0.2]', '0:0:0:0:0:0:0:1'])('%s is loopback', (text) => {
    expect(isLoopbackAddress(text)).toBe(true);
  });

  // `::127.0.0.1` is IPv4-compatible (::7f00:1), not mapped: it is not the loopback address.
  it.each(['::127.0.0.1', '::7f00:1', '128.0.0.1', '10.0.0.1', '::2', '::ffff:10.0.0.1', '127.1', 'localhost', '0.0.0.0', '::'])('%s is not', (text) => {
    expect(isLoopbackAddress(text)).toBe(false);
  });
});

describe('isLocalNetworkAddress', () => {
  it.each(['127.0.0.1', '::1', '10.1.2.3', '172.16.0.1', '192.168.1.10', '169.254.169.254', 'fd00::1', 'fe80::1%eth0', '[fe80::1]', '::ffff:192.168.1.1'])('%s is local', (text) => {
    expect(isLocalNetworkAddress(text)).toBe(true);
  });

  it.each(['8.8.8.8', '2001:4860:4860::8888', '::ffff:8.8.8.8', '100.64.0.1', 'localhost', 'example.com'])('%s is not', (text) => {
    expect(isLocalNetworkAddress(text)).toBe(false);
  });
});

describe('canonicalAddress', () => {
  it('spells one address one way', () => {
    expect(canonicalAddress('::1')).toBe(canonicalAddress('0:0:0:0:0:0:0:1'));
    expect(canonicalAddress('[::1]')).toBe(canonicalAddress('::1'));
    expect(canonicalAddress('2001:DB8::1')).toBe(canonicalAddress('2001:db8:0:0:0:0:0:1'));
  });

  it('keeps what tells two peers apart: family, zone id, mapped versus compatible', () => {
    expect(canonicalAddress('::ffff:127.0.0.1')).not.toBe(canonicalAddress('127.0.0.1'));
    expect(canonicalAddress('::127.0.0.1')).not.toBe(canonicalAddress('::ffff:127.0.0.1'));
    expect(canonicalAddress('fe80::1%eth0')).not.toBe(canonicalAddress('fe80::1%eth1'));
    expect(canonicalAddress('fe80::1%eth0')).not.toBe(canonicalAddress('fe80::1'));
  });

  it('refuses what is not a strict literal', () => {
    expect(canonicalAddress('127.1')).toBeUndefined();
    expect(canonicalAddress('localhost')).toBeUndefined();
  });
});

describe('addressUnit', () => {
  it('counts IPv4 as itself, IPv4-mapped as its IPv4, IPv6 by its /64 whatever the zone', () => {
    expect(addressUnit('203.0.113.7')).toBe('203.0.113.7');
    expect(addressUnit('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(addressUnit('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
    expect(addressUnit('2001:db8:1:2::9')).toBe('2001:db8:1:2::/64');
    expect(addressUnit('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(addressUnit('::1')).toBe('0:0:0:0::/64');
    expect(addressUnit('not an address')).toBeUndefined();
  });
});
