/**
 * Attacks on the TCP failed-authentication limit (docs/security.md#threat-tcp), over loopback
 * with real connections: a burst of concurrent bad keys from one address (authentication awaits
 * the database, so every attempt used to pass the check before the first failed), and failures
 * sprayed round-robin over more source addresses (127.0.x.y) than the throttle remembers.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, startResearchDaemon, type ResearchDaemon } from './helpers.js';

const LIMIT = 3;
const TRACKED = 8;

/** One request from `localAddress` (a loopback source), on its own connection; its status. */
function statusFrom(base: string, localAddress: string, key: string): Promise<number> {
  const url = new URL('/api/v1/research/research_x', base);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, localAddress, agent: false, headers: { authorization: `Bearer ${key}` } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('research API over TCP: evading the failed-authentication limit', () => {
  let d: ResearchDaemon;
  let forged: string;
  beforeAll(async () => {
    d = await startResearchDaemon({ overrides: { tcpAuthThrottle: { maxFailures: LIMIT, windowMs: 60_000, maxTracked: TRACKED } } });
    const key = await createKey(d.daemon.researchDbFile, 'ws_1');
    forged = `${key.slice(0, -4)}AAAA`;
  });
  afterAll(async () => {
    await d?.close();
  });

  it('a burst of concurrent bad keys from one address gets the limit, not one guess per connection', async () => {
    const statuses = await Promise.all(Array.from({ length: 40 }, () => statusFrom(d.base, '127.0.9.1', forged)));
    expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(LIMIT);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(40 - LIMIT);
  });

  it('spraying more source addresses than are remembered gains nothing', async () => {
    let unauthorized = 0;
    for (let round = 0; round < 8; round++) {
      for (let i = 1; i <= TRACKED + 2; i++) if ((await statusFrom(d.base, `127.0.10.${i}`, forged)) === 401) unauthorized += 1;
    }
    // Without the carry, every one of the 80 attempts was a 401 (each address forgotten in turn).
    expect(unauthorized).toBeLessThanOrEqual((TRACKED + 1) * LIMIT);
  });
});
