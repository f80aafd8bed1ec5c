/**
 * Host policy corpus. Pure: vetHost never connects, and every resolver here is a fake, so public
 * and private addresses can appear freely without any packet leaving the machine.
 */
import { describe, expect, it } from 'vitest';
import { parseFetchUrl } from '../../../src/egress/fetch-url.js';
import { vetHost, raceAbort, type VetOptions } from '../../../src/egress/host-vetting.js';
import { FusionError } from '../../../src/errors.js';
import { forbiddenResolver, scriptedResolver } from '../../integration/egress/origin.js';

function options(overrides: Partial<VetOptions> = {}): VetOptions {
  return { resolve: forbiddenResolver(), overrides: new Map(), allowCidrs: [], signal: new AbortController().signal, ...overrides };
}

async function refusal(raw: string, hop: number, opts: VetOptions = options()): Promise<FusionError> {
  try {
    await vetHost(parseFetchUrl(raw), hop, opts);
  } catch (err) {
    expect(err).toBeInstanceOf(FusionError);
    return err as FusionError;
  }
  throw new Error(`${raw} was allowed`);
}

const IPV4_ENCODINGS = [
  'http://127.0.0.1/',
  'http://2130706433/',
  'http://0x7f.1/',
  'http://127.1/',
  'http://0177.0.0.1/',
  'http://0x7f000001/',
  'http://017700000001/',
  'http://127.000.000.001/',
  'http://127.0.0.1./',
  'http://%31%32%37.0.0.1/',
  'http://0/',
  'http://0.0.0.0/',
  'http://10.1/',
  'http://192.168.1.1/',
  'http://172.16.0.1/',
  'http://169.254.169.254/',
  'http://0xa9fea9fe/',
  'http://2852039166/',
  'http://100.64.0.1/',
  'http://192.0.0.1/',
  'http://192.0.2.1/',
  'http://198.18.0.1/',
  'http://198.51.100.1/',
  'http://203.0.113.1/',
  'http://224.0.0.1/',
  'http://240.0.0.1/',
  'http://255.255.255.255/',
  // Beyond the original (docs/behaviour.md#e3).
  'http://168.63.129.16/',
  'http://192.88.99.1/',
];

const IPV6_FORMS = [
  'http://[::1]/',
  'http://[0:0:0:0:0:0:0:1]/',
  'http://[::]/',
  'http://[::ffff:127.0.0.1]/',
  'http://[::ffff:7f00:1]/',
  'http://[::ffff:169.254.169.254]/',
  'http://[::ffff:8.8.8.8]/',
  'http://[::127.0.0.1]/',
  'http://[::8.8.8.8]/',
  'http://[64:ff9b::7f00:1]/',
  'http://[64:ff9b::808:808]/',
  'http://[64:ff9b:1::1]/',
  'http://[100::1]/',
  'http://[2001:2::1]/',
  'http://[2001:db8::1]/',
  'http://[2002:7f00:1::]/',
  'http://[2002:808:808::1]/',
  'http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/',
  'http://[fc00::1]/',
  'http://[fd12:3456::1]/',
  'http://[fe80::1]/',
  'http://[fec0::1]/',
  'http://[ff02::1]/',
  'http://[fd00:ec2::254]/',
  'http://[3fff::1]/',
];

const BLOCKED_NAMES = [
  'http://localhost/',
  'http://LOCALHOST./',
  'http://api.localhost/',
  'http://metadata/',
  'http://metadata.local/',
  'http://metadata.google.internal/',
  'http://Metadata.Google.Internal./',
  'http://metadata.goog/',
  'http://instance-data/',
  'http://instance-data.ec2.internal/',
];

describe('vetHost: IP literals are classified without DNS', () => {
  it.each([...IPV4_ENCODINGS, ...IPV6_FORMS])('blocks %s on the first hop and as a redirect target', async (raw) => {
    const resolve = forbiddenResolver();
    const first = await refusal(raw, 0, options({ resolve }));
    expect(first.code).toBe('blocked_address');
    const later = await refusal(raw, 3, options({ resolve }));
    expect(later.code).toBe('redirect_blocked');
    expect(later.details.hop).toBe(3);
    expect(resolve.calls).toEqual([]);
  });

  it('decodes and names the IPv4 embedded in an IPv6 literal', async () => {
    const mapped = await refusal('http://[::ffff:169.254.169.254]/', 0);
    expect(mapped.details).toMatchObject({ embedded_ipv4: '169.254.169.254', range: '::ffff:0:0/96' });
    expect(mapped.message).toContain('169.254.169.254');
    const nat64 = await refusal('http://[64:ff9b::808:808]/', 0);
    expect(nat64.details).toMatchObject({ embedded_ipv4: '8.8.8.8' });
    const teredo = await refusal('http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/', 0);
    expect(teredo.details).toMatchObject({ range: '2001::/32', embedded_ipv4: '192.0.2.45' });
    const sixToFour = await refusal('http://[2002:7f00:1::]/', 0);
    expect(sixToFour.details).toMatchObject({ embedded_ipv4: '127.0.0.1' });
  });

  it('pins a public literal without consulting the resolver', async () => {
    const resolve = forbiddenResolver();
    const pinned = await vetHost(parseFetchUrl('http://93.184.216.34/'), 0, options({ resolve }));
    expect(pinned).toMatchObject({ address: '93.184.216.34', family: 4, via: 'literal' });
    const v6 = await vetHost(parseFetchUrl('http://[2606:2800:220:1:248:1893:25c8:1946]/'), 0, options({ resolve }));
    expect(v6).toMatchObject({ family: 6, via: 'literal' });
    expect(resolve.calls).toEqual([]);
  });

  it('treats allowCidrs ranges as public', async () => {
    const pinned = await vetHost(parseFetchUrl('http://127.0.0.2/'), 0, options({ allowCidrs: ['127.0.0.2/32'] }));
    expect(pinned).toMatchObject({ address: '127.0.0.2', allowedBy: '127.0.0.2/32' });
    expect((await refusal('http://127.0.0.1/', 0, options({ allowCidrs: ['127.0.0.2/32'] }))).code).toBe('blocked_address');
  });
});

describe('vetHost: names', () => {
  it.each(BLOCKED_NAMES)('blocks %s by name before any lookup or override', async (raw) => {
    const resolve = forbiddenResolver();
    const err = await refusal(raw, 0, options({ resolve, allowCidrs: ['0.0.0.0/0'] }));
    expect(err.code).toBe('blocked_address');
    expect(err.details.reason).toBe('blocked name');
    expect(resolve.calls).toEqual([]);
  });

  it('consults the resolver exactly once and pins the first answer', async () => {
    const resolve = scriptedResolver({ 'example.com': [['93.184.216.34', '93.184.216.35'], ['10.0.0.1']] });
    const pinned = await vetHost(parseFetchUrl('https://example.com/'), 0, options({ resolve }));
    expect(pinned).toMatchObject({ address: '93.184.216.34', via: 'dns', answers: ['93.184.216.34', '93.184.216.35'] });
    expect(resolve.calls).toEqual(['example.com']);
  });

  it.each([
    [['93.184.216.34', '10.0.0.1']],
    [['10.0.0.1', '93.184.216.34']],
    [['93.184.216.34', '::1']],
    [['2606:2800:220:1::1', 'fd00::1']],
    [['93.184.216.34', '::ffff:127.0.0.1']],
    [['93.184.216.34', '169.254.169.254']],
    [['not-an-address']],
    [['fe80::1%eth0']],
  ])('refuses the whole answer set %j if any answer is not public', async (answers) => {
    const resolve = scriptedResolver({ 'mixed.test': [answers] });
    const err = await refusal('http://mixed.test/', 0, options({ resolve }));
    expect(err.code).toBe('blocked_address');
    expect(err.details).toMatchObject({ host: 'mixed.test', via: 'dns', answers });
    expect(resolve.calls).toEqual(['mixed.test']);
    expect((await refusal('http://mixed.test/', 1, options({ resolve: scriptedResolver({ 'mixed.test': [answers] }) }))).code).toBe('redirect_blocked');
  });

  it('reports resolver failures and empty answers as dns_failure', async () => {
    const failing = scriptedResolver({});
    const err = await refusal('http://nowhere.test/', 0, options({ resolve: failing }));
    expect(err.code).toBe('dns_failure');
    expect(err.message).toContain('ENOTFOUND');
    const empty = await refusal('http://empty.test/', 0, options({ resolve: scriptedResolver({ 'empty.test': [[]] }) }));
    expect(empty.code).toBe('dns_failure');
    // dns_failure stays dns_failure on a redirect hop (it is not a policy block).
    expect((await refusal('http://nowhere.test/', 2, options({ resolve: failing }))).code).toBe('dns_failure');
  });

  it('races the resolver against the deadline signal', async () => {
    const controller = new AbortController();
    const reason = new FusionError('request_timeout', 'deadline');
    const hanging = async (): Promise<never> => new Promise<never>(() => undefined);
    setTimeout(() => controller.abort(reason), 20); // the deadline firing is the subject
    await expect(vetHost(parseFetchUrl('http://slow.test/'), 0, options({ resolve: hanging, signal: controller.signal }))).rejects.toBe(reason);
    await expect(raceAbort(async () => 1, controller.signal)).rejects.toBe(reason);
  });

  it('uses a static override instead of DNS, and still classifies it', async () => {
    const resolve = forbiddenResolver();
    const pinned = await vetHost(parseFetchUrl('http://origin.test/'), 0, options({ resolve, overrides: new Map([['origin.test', '93.184.216.34']]) }));
    expect(pinned).toMatchObject({ address: '93.184.216.34', via: 'override' });
    const blocked = await refusal('http://origin.test/', 0, options({ resolve, overrides: new Map([['origin.test', '10.0.0.5']]) }));
    expect(blocked.code).toBe('blocked_address');
    expect(blocked.details).toMatchObject({ via: 'override', address: '10.0.0.5' });
    const allowed = await vetHost(parseFetchUrl('http://origin.test/'), 0, options({ resolve, overrides: new Map([['origin.test', '10.0.0.5']]), allowCidrs: ['10.0.0.0/8'] }));
    expect(allowed).toMatchObject({ address: '10.0.0.5', allowedBy: '10.0.0.0/8' });
    expect(resolve.calls).toEqual([]);
  });
});
