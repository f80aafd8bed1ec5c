/**
 * What a research answer says about the declared sources it could not read: each declared URL
 * no candidate fetched is named with the last reason a fetch of it failed (DNS, a refused
 * address, robots.txt, an HTTP error…), or as never requested. Without this, an answer whose
 * every source failed reads as "nothing could be confirmed" with no reason
 * (docs/behaviour.md#what-the-task-could-read). Deterministic: declared order, last failure.
 */
import { codeSpan } from '../research/crawl/research-document.js';

export interface SourceNotRead {
  url: string;
  reason: string;
}

/** Declared sources no fetch succeeded for, each with the last failure of a fetch of it. */
export function sourcesNotRead(declared: readonly string[], fetched: ReadonlyArray<{ url: string }>, failures: readonly SourceNotRead[]): SourceNotRead[] {
  const read = new Set(fetched.map((p) => p.url));
  const lastFailure = new Map<string, string>();
  for (const f of failures) lastFailure.set(f.url, f.reason);
  return declared.filter((url) => !read.has(url)).map((url) => ({ url, reason: lastFailure.get(url) ?? 'no candidate fetched it' }));
}

/** The closing section naming the sources not read and why (empty when every source was read). */
export function sourcesNotice(notRead: readonly SourceNotRead[]): string {
  if (notRead.length === 0) return '';
  return [
    '',
    '',
    '## Sources not read',
    '',
    `This answer was written without ${notRead.length === 1 ? 'this declared source' : `these ${String(notRead.length)} declared sources`}; nothing in ${notRead.length === 1 ? 'it' : 'them'} is reflected above:`,
    '',
    ...notRead.map((s) => `- ${codeSpan(s.url)}: ${codeSpan(s.reason.slice(0, 300))}`),
  ].join('\n');
}
