import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, isErrorCode } from '../../src/errors.js';
import { BROKER_CLIENT_CODES } from '../../sandbox/broker-client.js';
import { AGENT_ERROR_CODES } from '../../sandbox/agent-loop.js';
import { BROKER_FETCH_REFUSALS } from '../../src/broker/broker-server.js';

describe('README error-code table', () => {
  it('lists exactly the codes of the registry, with their HTTP status and retryability', () => {
    const readme = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');
    const rows = [...readme.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \| (yes|no) \|/gm)].map((m) => ({ code: m[1]!, http: Number(m[2]), retryable: m[3] === 'yes' }));
    const registry = Object.entries(ERROR_CODES).map(([code, info]) => ({ code, http: info.httpStatus, retryable: info.retryable }));
    expect(rows.sort((a, b) => a.code.localeCompare(b.code))).toEqual(registry.sort((a, b) => a.code.localeCompare(b.code)));
  });

  it('holds every code the sandbox child and the broker report on their own (they used to live outside it)', () => {
    const own = [...Object.values(BROKER_CLIENT_CODES), ...Object.values(AGENT_ERROR_CODES), ...Object.values(BROKER_FETCH_REFUSALS)];
    expect(own.filter((code) => !isErrorCode(code))).toEqual([]);
  });
});
