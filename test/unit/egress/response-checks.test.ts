import { Readable } from 'node:stream';
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { checkContentEncoding, checkContentLength, checkMediaType, parseContentType, readCappedBody } from '../../../src/egress/response-checks.js';
import { FusionError } from '../../../src/errors.js';

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(FusionError);
    return (err as FusionError).code;
  }
  return 'ok';
}

describe('Content-Type', () => {
  it('parses the media type and a quoted or bare charset', () => {
    expect(parseContentType('Text/HTML; Charset="UTF-8"')).toEqual({ mediaType: 'text/html', charset: 'utf-8' });
    expect(parseContentType('text/plain;charset=ISO-8859-1;format=flowed')).toEqual({ mediaType: 'text/plain', charset: 'iso-8859-1' });
    expect(parseContentType('text/markdown')).toEqual({ mediaType: 'text/markdown', charset: undefined });
    expect(parseContentType('garbage')).toBeUndefined();
  });

  it.each(['text/html', 'application/xhtml+xml', 'text/plain', 'text/markdown', 'TEXT/HTML; charset=utf-8'])('accepts %s', (type) => {
    expect(codeOf(() => checkMediaType({ 'content-type': type }, 200))).toBe('ok');
  });

  it.each(['application/json', 'application/octet-stream', 'image/png', 'text/css', 'application/javascript', 'text/html-sandboxed', 'html'])('rejects %s', (type) => {
    expect(codeOf(() => checkMediaType({ 'content-type': type }, 200))).toBe('unsupported_content_type');
  });

  it('rejects a missing or self-contradicting Content-Type', () => {
    expect(codeOf(() => checkMediaType({}, 200))).toBe('unsupported_content_type');
    expect(codeOf(() => checkMediaType({ 'content-type': ['text/html', 'application/json'] as unknown as string }, 200))).toBe('unsupported_content_type');
  });

  it('keeps the status in the details', () => {
    try {
      checkMediaType({ 'content-type': 'application/json' }, 203);
    } catch (err) {
      expect((err as FusionError).details).toMatchObject({ http_status: 203, content_type: 'application/json' });
    }
  });
});

describe('Content-Encoding', () => {
  it('accepts none or identity', () => {
    expect(codeOf(() => checkContentEncoding({}, 200))).toBe('ok');
    expect(codeOf(() => checkContentEncoding({ 'content-encoding': 'identity' }, 200))).toBe('ok');
  });

  it.each(['gzip', 'br', 'deflate', 'identity, gzip', 'zstd'])('refuses %s as unsupported_content_type', (encoding) => {
    expect(codeOf(() => checkContentEncoding({ 'content-encoding': encoding }, 200))).toBe('unsupported_content_type');
  });
});

describe('Content-Length', () => {
  it('accepts a length within the cap and none at all', () => {
    expect(checkContentLength({ 'content-length': '10' }, 10, 200)).toBe(10);
    expect(checkContentLength({}, 10, 200)).toBeUndefined();
  });

  it.each(['abc', '-1', '1.5', '', '0x10', '1 2'])('malformed %j → network_error', (value) => {
    expect(codeOf(() => checkContentLength({ 'content-length': value }, 100, 200))).toBe('network_error');
  });

  it('over the cap → response_too_large before reading', () => {
    expect(codeOf(() => checkContentLength({ 'content-length': '11' }, 10, 200))).toBe('response_too_large');
    expect(codeOf(() => checkContentLength({ 'content-length': '99999999999999999999999' }, 10, 200))).toBe('response_too_large');
  });
});

describe('readCappedBody', () => {
  it('returns the bytes in their own buffer with the sha256 of the raw body', async () => {
    const body = await readCappedBody(Readable.from([Buffer.from('ab'), Buffer.from('cd')]), 4, 200);
    expect(Buffer.from(body.bytes).toString()).toBe('abcd');
    expect(body.bytes.byteOffset).toBe(0);
    expect(body.bytes.buffer.byteLength).toBe(4);
    expect(body.sha256).toBe(createHash('sha256').update('abcd').digest('hex'));
  });

  it('stops an endless stream at the cap', async () => {
    let produced = 0;
    const endless = new Readable({
      read() {
        produced += 1024;
        this.push(Buffer.alloc(1024, 0x61));
      },
    });
    await expect(readCappedBody(endless, 10_000, 200)).rejects.toMatchObject({ code: 'response_too_large' });
    expect(endless.destroyed).toBe(true);
    expect(produced).toBeLessThan(100_000);
  });
});
