import { describe, expect, it } from 'vitest';
import { backoffMs, DEFAULT_RETRY_POLICY, isRetryableStatus, parseRetryAfter, upstreamMessage } from '../../../src/models/remote-provider.js';

describe('http-retry helpers', () => {
  it('parses retry-after as seconds, HTTP date, or retry-after-ms', () => {
    const now = Date.parse('2025-01-01T00:00:00Z');
    expect(parseRetryAfter({ 'retry-after': '2' }, now)).toBe(2000);
    expect(parseRetryAfter({ 'retry-after': '0.5' }, now)).toBe(500);
    expect(parseRetryAfter({ 'retry-after': 'Wed, 01 Jan 2025 00:00:07 GMT' }, now)).toBe(7000);
    expect(parseRetryAfter({ 'retry-after': 'Tue, 31 Dec 2024 23:00:00 GMT' }, now)).toBe(0);
    expect(parseRetryAfter({ 'retry-after-ms': '1234', 'retry-after': '9' }, now)).toBe(1234);
    expect(parseRetryAfter({ 'retry-after': 'soon' }, now)).toBeUndefined();
    expect(parseRetryAfter({ 'retry-after': '-3' }, now)).toBeUndefined();
    expect(parseRetryAfter({}, now)).toBeUndefined();
  });

  it('backs off exponentially with bounded jitter', () => {
    const p = DEFAULT_RETRY_POLICY;
    expect(backoffMs(1, p, () => 0)).toBe(250);
    expect(backoffMs(1, p, () => 1)).toBe(500);
    expect(backoffMs(2, p, () => 1)).toBe(1000);
    expect(backoffMs(3, p, () => 0.5)).toBe(1500);
    expect(backoffMs(20, p, () => 1)).toBe(p.maxDelayMs);
  });

  it('retries 408, 429 and 5xx only', () => {
    expect([408, 429, 500, 502, 503, 504, 529].every(isRetryableStatus)).toBe(true);
    expect([400, 401, 403, 404, 413, 422].some(isRetryableStatus)).toBe(false);
  });

  it('extracts the upstream error message from OpenAI and Anthropic envelopes', () => {
    expect(upstreamMessage('{"error":{"message":"bad model","type":"x"}}')).toBe('bad model');
    expect(upstreamMessage('{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')).toBe('Overloaded');
    expect(upstreamMessage('{"error":"plain"}')).toBe('plain');
    expect(upstreamMessage('<html>502 Bad Gateway</html>')).toBe('<html>502 Bad Gateway</html>');
    expect(upstreamMessage('')).toBe('(empty body)');
  });
});
