/**
 * Limits and fixed request headers of the guarded fetch (docs/behaviour.md#e3). Shared by the fetcher, the
 * extraction worker and the CLI, so the numbers live in one place.
 */

/** One deadline over DNS, connect, every redirect, the transfer and the extraction. */
export const DEFAULT_DEADLINE_MS = 90_000;
/** Raw response body cap (4 MiB), enforced on Content-Length and again while streaming. */
export const DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024;
/** Extracted output cap (32 KiB), cut on a whole code point. */
export const DEFAULT_MAX_OUTPUT_BYTES = 32 * 1024;
/** Redirects followed; the next redirect response fails with `redirect_limit`. */
export const DEFAULT_MAX_REDIRECTS = 5;
/** Heap bound of one extraction worker (V8 old generation). */
export const DEFAULT_EXTRACT_MEMORY_MB = 512;
/** Extraction workers kept warm; more concurrent fetches queue (the wait counts on their deadline). */
export const DEFAULT_EXTRACT_WORKERS = 2;

export const ACCEPT_HEADER = 'text/markdown, text/html;q=0.9, application/xhtml+xml;q=0.8, text/plain;q=0.7';
/** Compressed bodies are refused (a decompression bomb would bypass the byte cap's meaning). */
export const ACCEPT_ENCODING_HEADER = 'identity';
export const DEFAULT_USER_AGENT = 'fusion-supervisor/0.1 (+guarded-fetch)';

/** Status codes treated as redirects; their body is never read. */
export const REDIRECT_STATUSES: ReadonlySet<number> = new Set([300, 301, 302, 303, 307, 308]);

export const HTML_MEDIA_TYPES: ReadonlySet<string> = new Set(['text/html', 'application/xhtml+xml']);
export const ALLOWED_MEDIA_TYPES: ReadonlySet<string> = new Set(['text/html', 'application/xhtml+xml', 'text/plain', 'text/markdown']);

export type ExtractMode = 'text' | 'markdown';

/** Which block code a policy refusal gets: the declared URL's hop or a redirect hop (docs/behaviour.md#e3). */
export function blockCode(hop: number): 'blocked_address' | 'redirect_blocked' {
  return hop === 0 ? 'blocked_address' : 'redirect_blocked';
}
