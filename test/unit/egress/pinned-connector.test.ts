import { describe, expect, it } from 'vitest';
import { remoteAddressProblem } from '../../../src/egress/pinned-connector.js';

describe('remoteAddressProblem (the socket must be connected to the pinned address)', () => {
  it('accepts the pinned address in any text form', () => {
    expect(remoteAddressProblem('127.0.0.2', '127.0.0.2')).toBeUndefined();
    expect(remoteAddressProblem('2001:db8::1', '2001:0db8:0:0:0:0:0:1')).toBeUndefined();
  });

  it.each([
    [undefined, '127.0.0.2'],
    ['', '127.0.0.2'],
    ['127.0.0.1', '127.0.0.2'],
    ['::ffff:127.0.0.2', '127.0.0.2'],
    ['::1', '127.0.0.1'],
    ['garbage', '127.0.0.2'],
  ])('refuses remote %j for pinned %s', (remote, pinned) => {
    expect(remoteAddressProblem(remote, pinned)).toBeTypeOf('string');
  });
});
