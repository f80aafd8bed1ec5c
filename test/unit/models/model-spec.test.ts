import { describe, expect, it } from 'vitest';
import { checkBaseUrl, formatModelSpec, isLocalEndpoint, parseModelSpec } from '../../../src/models/model-spec.js';

describe('parseModelSpec', () => {
  it.each([
    ['openai:qwen3@http://127.0.0.1:11434/v1', { provider: 'openai', model: 'qwen3', baseUrl: 'http://127.0.0.1:11434/v1' }],
    ['openai:qwen3:8b@http://127.0.0.1:11434/v1/', { provider: 'openai', model: 'qwen3:8b', baseUrl: 'http://127.0.0.1:11434/v1' }],
    ['anthropic:claude-sonnet-4-5', { provider: 'anthropic', model: 'claude-sonnet-4-5' }],
    ['anthropic:claude-3-5-sonnet@20240620', { provider: 'anthropic', model: 'claude-3-5-sonnet@20240620' }],
    ['  openai:gpt-4.1  ', { provider: 'openai', model: 'gpt-4.1' }],
    ['openai:meta-llama/Llama-3.3-70B@https://api.together.xyz/v1', { provider: 'openai', model: 'meta-llama/Llama-3.3-70B', baseUrl: 'https://api.together.xyz/v1' }],
    ['builtin:content-search', { provider: 'builtin', model: 'content-search' }],
  ])('%s', (text, expected) => {
    expect(parseModelSpec(text)).toEqual(expected);
  });

  it.each([
    ['', 'model spec must not be blank (expected PROVIDER:MODEL[@BASE_URL])'],
    ['gpt-4.1', 'model spec "gpt-4.1": must look like PROVIDER:MODEL[@BASE_URL]'],
    [':gpt', 'model spec ":gpt": provider must not be blank (expected PROVIDER:MODEL[@BASE_URL])'],
    ['gemini:pro', 'model spec "gemini:pro": unknown provider "gemini" (expected openai, anthropic, builtin)'],
    ['openai:', 'model spec "openai:": model name must not be blank'],
    ['openai:@http://x/v1', 'model spec "openai:@http://x/v1": model name must not be blank'],
    ['openai:m@ftp://host/v1', 'model spec "openai:m@ftp://host/v1": base URL "ftp://host/v1" must be http or https'],
    ['openai:m@http://', 'model spec "openai:m@http://": base URL "http://" is not a valid URL'],
    ['openai:m@http://h/v1?x=1', 'model spec "openai:m@http://h/v1?x=1": base URL "http://h/v1?x=1" must not have a query or fragment'],
    ['builtin:content-search@http://h', 'model spec "builtin:content-search@http://h": builtin models take no base URL'],
    ['builtin:gpt', 'model spec "builtin:gpt": unknown builtin model "gpt" (expected content-search, path-search, definition-search)'],
  ])('rejects %j', (text, message) => {
    expect(() => parseModelSpec(text)).toThrow(expect.objectContaining({ code: 'invalid_input', message }));
  });

  it('never echoes URL credentials', () => {
    let message = '';
    try {
      parseModelSpec('openai:m@https://user:sk-secret-123456789@host/v1');
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toBe('model spec "openai:m@https://***@host/v1": base URL "https://***@host/v1" must not contain credentials');
    expect(message).not.toContain('sk-secret');
  });

  it('formats back', () => {
    expect(formatModelSpec(parseModelSpec('openai:qwen3@http://127.0.0.1:11434/v1'))).toBe('openai:qwen3@http://127.0.0.1:11434/v1');
  });
});

describe('checkBaseUrl / isLocalEndpoint', () => {
  it('normalises trailing slashes', () => {
    expect(checkBaseUrl('https://api.openai.com/v1/')).toEqual({ ok: true, url: 'https://api.openai.com/v1' });
    expect(checkBaseUrl('http://[::1]:8080')).toEqual({ ok: true, url: 'http://[::1]:8080' });
  });

  it.each([
    ['http://127.0.0.1:11434/v1', true],
    ['http://localhost:8000', true],
    ['http://[::1]:8000', true],
    ['http://192.168.1.20:8000/v1', true],
    ['http://10.0.0.5/v1', true],
    ['https://api.openai.com/v1', false],
    ['https://8.8.8.8/v1', false],
    ['http://my-gpu-box:8000', false],
  ])('%s local=%s', (url, local) => {
    expect(isLocalEndpoint(url)).toBe(local);
  });
});
