/**
 * Model spec strings: `PROVIDER:MODEL[@BASE_URL]`, e.g. `openai:qwen3@http://127.0.0.1:11434/v1`,
 * `anthropic:claude-sonnet-4-5`, `builtin:content-search`.
 *
 * Model names may themselves contain `:` and `@` (`qwen3:8b`, `claude-x@20240620`), so the base
 * URL is only split off at an `@` followed by a URL scheme (`@http://`, `@https://`, `@ftp://` —
 * the last then fails as an unsupported scheme rather than silently becoming part of a name).
 *
 * Error messages never echo URL credentials: a spec is quoted with any `user:pass@` masked.
 */
import { DEFAULT_BASE_URLS, MODEL_PROVIDERS, type ModelProviderName } from '../contracts/model-config.js';
import { FusionError } from '../errors.js';
import { isLocalNetworkAddress } from '../contracts/address-class.js';
import { BUILTIN_STRATEGIES } from './builtin/index.js';

export interface ModelSpec {
  provider: ModelProviderName;
  model: string;
  /** Normalised (no trailing `/`); absent → the provider's default. Never set for builtin. */
  baseUrl?: string;
}

const SPEC = /^([^:]*):(.*?)(?:@([A-Za-z][A-Za-z0-9+.-]*:\/\/.*))?$/s;

/** Masks `user:pass@` in anything URL-shaped, for error messages. */
export function maskUrlCredentials(text: string): string {
  return text.replace(/([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^/@\s]*@/g, '$1***@');
}

function specError(spec: string, problem: string): FusionError {
  return new FusionError('invalid_input', `model spec ${JSON.stringify(maskUrlCredentials(spec))}: ${problem}`, {
    details: { spec: maskUrlCredentials(spec) },
  });
}

/**
 * Validates and normalises a provider base URL: http(s) only, no credentials (keys travel in
 * headers, never in URLs that end up in logs), no query or fragment, no trailing slash.
 * Returns the problem as text (callers add their own context), or the normalised URL.
 */
export function checkBaseUrl(raw: string): { ok: true; url: string } | { ok: false; problem: string } {
  const shown = JSON.stringify(maskUrlCredentials(raw));
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, problem: `base URL ${shown} is not a valid URL` };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { ok: false, problem: `base URL ${shown} must be http or https` };
  if (url.username !== '' || url.password !== '') return { ok: false, problem: `base URL ${shown} must not contain credentials` };
  if (url.search !== '' || url.hash !== '') return { ok: false, problem: `base URL ${shown} must not have a query or fragment` };
  return { ok: true, url: url.href.replace(/\/+$/, '') };
}

export function parseModelSpec(text: string): ModelSpec {
  const spec = text.trim();
  if (spec === '') throw new FusionError('invalid_input', 'model spec must not be blank (expected PROVIDER:MODEL[@BASE_URL])');
  const m = SPEC.exec(spec);
  if (!m) throw specError(spec, 'must look like PROVIDER:MODEL[@BASE_URL]');
  const provider = m[1]!.trim();
  const model = m[2]!.trim();
  const rawUrl = m[3];
  if (provider === '') throw specError(spec, 'provider must not be blank (expected PROVIDER:MODEL[@BASE_URL])');
  if (!(MODEL_PROVIDERS as readonly string[]).includes(provider)) {
    throw specError(spec, `unknown provider ${JSON.stringify(provider)} (expected ${MODEL_PROVIDERS.join(', ')})`);
  }
  if (model === '') throw specError(spec, 'model name must not be blank');
  const name = provider as ModelProviderName;
  if (name === 'builtin') {
    if (rawUrl !== undefined) throw specError(spec, 'builtin models take no base URL');
    checkBuiltinModel(model, (problem) => specError(spec, problem));
    return { provider: name, model };
  }
  if (rawUrl === undefined) return { provider: name, model };
  const checked = checkBaseUrl(rawUrl);
  if (!checked.ok) throw specError(spec, checked.problem);
  return { provider: name, model, baseUrl: checked.url };
}

export function checkBuiltinModel(model: string, fail: (problem: string) => Error): void {
  if (!(BUILTIN_STRATEGIES as readonly string[]).includes(model)) {
    throw fail(`unknown builtin model ${JSON.stringify(model)} (expected ${BUILTIN_STRATEGIES.join(', ')})`);
  }
}

export function defaultBaseUrl(provider: Exclude<ModelProviderName, 'builtin'>): string {
  return DEFAULT_BASE_URLS[provider];
}

export function formatModelSpec(spec: ModelSpec): string {
  return `${spec.provider}:${spec.model}${spec.baseUrl === undefined ? '' : `@${spec.baseUrl}`}`;
}

/**
 * A local endpoint (loopback, private or link-local literal, `localhost`) may run without an
 * API key (ollama, llama.cpp, vLLM on the same machine or LAN). Every other endpoint is remote
 * and needs one. Hostnames are not resolved here: only `localhost` names count as local.
 */
export function isLocalEndpoint(baseUrl: string): boolean {
  let host: string;
  try {
    host = new URL(baseUrl).hostname.toLowerCase();
  } catch {
    return false;
  }
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  return isLocalNetworkAddress(host);
}
