/**
 * Test rule: no test resolves a real name through the system resolver (tests reach web origins
 * only through the egress guard's seams: an injected resolver, or --resolve overrides). This
 * setup file, loaded into every test process, makes a system lookup of any name other than
 * `localhost` fail loudly instead of leaving the machine. Daemons that tests spawn as separate
 * processes are not covered; they get --resolve seams for every name they may meet.
 */
import dns from 'node:dns';
import { isIP } from 'node:net';
import { syncBuiltinESMExports } from 'node:module';

const allowed = (host: string): boolean => host === 'localhost' || isIP(host) !== 0;

function refusal(host: string): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(`test rule: a system DNS lookup of ${JSON.stringify(host)} was refused; use the guard's injected resolver or --resolve seams`);
  err.code = 'ENOTFOUND';
  process.stderr.write(`!!! ${err.message}\n`);
  return err;
}

const realLookup = dns.lookup.bind(dns);
const realPromiseLookup = dns.promises.lookup.bind(dns.promises);

dns.lookup = ((host: string, ...rest: unknown[]) => {
  if (allowed(host)) return (realLookup as (...args: unknown[]) => void)(host, ...rest);
  const callback = rest[rest.length - 1] as (err: Error) => void;
  process.nextTick(() => callback(refusal(host)));
}) as typeof dns.lookup;

dns.promises.lookup = ((host: string, options?: unknown) => {
  if (allowed(host)) return (realPromiseLookup as (h: string, o?: unknown) => Promise<unknown>)(host, options);
  return Promise.reject(refusal(host));
}) as typeof dns.promises.lookup;

// Named imports of builtins (`import { lookup } from 'node:dns/promises'`) see the patch too.
syncBuiltinESMExports();
