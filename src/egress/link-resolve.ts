/**
 * How an extracted page's references become absolute (one rule for every extractor): the base
 * is the first <base href> (resolved against the final URL, kept only when http(s)) or the final
 * URL; a reference is trimmed, an empty one or a `#fragment` is left as written, and one that
 * does not resolve is left as written too.
 */

/** The base URL for a page whose first <base href> is `declared` (or none). */
export function documentBase(declared: string | undefined, finalUrl: string): string {
  if (declared === undefined) return finalUrl;
  try {
    const resolved = new URL(declared, finalUrl);
    if (resolved.protocol === 'http:' || resolved.protocol === 'https:') return resolved.href;
  } catch {
    // An unparsable <base href> is ignored, as browsers do.
  }
  return finalUrl;
}

/** The absolute form of one href/src value, or undefined to leave it as written. */
export function absoluteReference(value: string, base: string): string | undefined {
  const trimmed = value.trim();
  if (trimmed === '' || trimmed.startsWith('#')) return undefined;
  try {
    return new URL(trimmed, base).href;
  } catch {
    return undefined;
  }
}

const HTTP_LINK = /^https?:\/\//iu;

/** Whether an (absolutised) href is one a crawler may follow. */
export function isHttpLink(href: string): boolean {
  return HTTP_LINK.test(href);
}
