import { describe, expect, it } from 'vitest';
import { assertListenAllowed, isLoopbackHost, parseListenAddress } from '../../../src/api/tcp-listener.js';

describe('--listen address', () => {
  it('parses HOST:PORT, [V6]:PORT and localhost:PORT', () => {
    expect(parseListenAddress('127.0.0.1:8787')).toEqual({ host: '127.0.0.1', port: 8787 });
    expect(parseListenAddress('[::1]:0')).toEqual({ host: '::1', port: 0 });
    expect(parseListenAddress('localhost:80')).toEqual({ host: 'localhost', port: 80 });
    for (const bad of ['127.0.0.1', ':80', '127.0.0.1:65536', '::1:80', 'example.com:80', '127.0.0.1:8o']) {
      expect(() => parseListenAddress(bad), bad).toThrow(/--listen/);
    }
  });

  it('allows loopback only, unless listen-public', () => {
    for (const h of ['127.0.0.1', '127.9.9.9', '::1', 'localhost', '::ffff:127.0.0.1']) expect(isLoopbackHost(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.1', '192.168.1.2', '2001:db8::1']) expect(isLoopbackHost(h), h).toBe(false);
    expect(() => assertListenAllowed({ host: '0.0.0.0', port: 1 }, false)).toThrow(/plain HTTP \(no TLS\).*--listen-public/s);
    expect(() => assertListenAllowed({ host: '0.0.0.0', port: 1 }, true)).not.toThrow();
    expect(() => assertListenAllowed({ host: '::1', port: 1 }, false)).not.toThrow();
  });
});
