import { describe, expect, it } from 'vitest';
import { redactSecrets } from '../../../src/contracts/secret-redaction.js';

// Key shapes the providers and the daemon use, each embedded the way upstream error text carries it.
const SHAPES: Array<[string, string, string]> = [
  ['Anthropic key', 'invalid x-api-key sk-ant-api03-AbCdEf0123456789_ghIJkl-mnop', 'sk-ant-api03-AbCdEf0123456789_ghIJkl-mnop'],
  ['OpenAI legacy key', 'Incorrect API key provided: sk-AbCdEf0123456789ghIJkl.', 'sk-AbCdEf0123456789ghIJkl'],
  ['OpenAI project key', 'key sk-proj-AbCdEf0123456789_ghIJ-kl rejected', 'sk-proj-AbCdEf0123456789_ghIJ-kl'],
  ['masked echo', 'Incorrect API key provided: sk-proj-abcd************wxyz', 'abcd************wxyz'],
  ['Bearer token', 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig', 'eyJhbGciOiJIUzI1NiJ9.payload.sig'],
  ['lower-case bearer', 'sent bearer abcdefghijklmnop', 'abcdefghijklmnop'],
  ['research API key', 'bad key fsk_key_0123456789abcdef_AbCdEf0123456789-_AbCdEf0123456789AbCdEf0', 'fsk_key_0123456789abcdef'],
  ['x-api-key header', 'x-api-key: hunter2hunter2', 'hunter2hunter2'],
  ['JSON api_key', '{"api_key": "hunter2hunter2"}', 'hunter2hunter2'],
  ['query access_token', 'GET /v1?access_token=abc123def456&x=1', 'abc123def456'],
  ['password pair', "password='pa55word!'", 'pa55word!'],
  ['Slack token', 'token xoxb-123456789012-abcdef', 'xoxb-123456789012-abcdef'],
];

describe('redactSecrets', () => {
  it.each(SHAPES)('removes a %s', (_name, text, secret) => {
    const out = redactSecrets(text);
    expect(out).not.toContain(secret);
    expect(out).toContain('[redacted]');
  });

  it('leaves ordinary text alone', () => {
    for (const text of ['plain text stays', 'the task-service skips idle tasks', 'see docs/behaviour.md#b2', 'HTTP 429 Too Many Requests']) {
      expect(redactSecrets(text)).toBe(text);
    }
  });

  it('keeps the name of a named secret so the message still says what was wrong', () => {
    expect(redactSecrets('x-api-key: hunter2hunter2')).toBe('x-api-key: [redacted]');
    expect(redactSecrets('Authorization: Bearer abcdefghijklmnop')).toMatch(/^Authorization: /);
  });
});
