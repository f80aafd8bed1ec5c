/**
 * Body → content (docs/behaviour.md#e3 "Extraction"). Pure and synchronous; it runs inside the extraction
 * worker (extract-worker.ts) so a hostile page costs that thread's bounded heap, not the daemon's
 * event loop. The benchmark also calls it in-thread as its baseline.
 *
 * - Charset from Content-Type (default utf-8), decoded fatally: a byte sequence invalid in the
 *   declared charset, or an unknown charset label, is `extraction_failed`, never U+FFFD soup.
 * - text/plain, text/markdown and application/json (a search profile's only type) are returned as is (format text / markdown); `extract` is
 *   ignored for them. HTML/XHTML: script/style/noscript/template removed, links and image
 *   sources made absolute against the final URL (or a <base href>), then Markdown (default) or
 *   plain text.
 * - Output is cut to `maxOutputBytes` on a whole code point, with `truncated: true`.
 * - On request (a crawler's profile), an HTML page's absolute http(s) <a href> links too.
 */
import { TextDecoder } from 'node:util';
import { FusionError, isFusionError } from '../errors.js';
import { HTML_MEDIA_TYPES, type ExtractMode } from './constants.js';
import { treeToMarkdown } from './html-to-markdown.js';
import { buildMarkdownTree } from './markdown-dom.js';
import { htmlToText } from './html-to-text.js';
import { truncateUtf8 } from './utf8-truncate.js';
import { MAX_LINKS_PER_PAGE } from './fetch-profile.js';

export interface ExtractInput {
  body: Uint8Array;
  /** Lowercase media type from Content-Type. */
  mediaType: string;
  /** Charset label from Content-Type; utf-8 when absent. */
  charset?: string | undefined;
  /** HTML only: output format (default markdown). */
  extract?: ExtractMode | undefined;
  /** The final URL: relative links are resolved against it. */
  baseUrl: string;
  maxOutputBytes: number;
  /** HTML only: also return the page's absolute http(s) links (<a href>), for a crawler. */
  links?: boolean | undefined;
}

export interface ExtractOutput {
  format: ExtractMode;
  content: string;
  truncated: boolean;
  /** Only when asked for: absolute http(s) links in document order, deduplicated, at most MAX_LINKS_PER_PAGE. */
  links?: string[];
}

/**
 * WHATWG windows-1252 for bytes 0x80-0x9F (index = byte - 0x80). Node 20's TextDecoder labels
 * `latin1`/`iso-8859-1`/`windows-1252` as windows-1252 but decodes those bytes as C1 controls
 * (ISO-8859-1), unlike every browser; this table restores the Encoding Standard's mapping.
 */
const WINDOWS_1252_HIGH = [
  0x20ac, 0x81, 0x201a, 0x192, 0x201e, 0x2026, 0x2020, 0x2021, 0x2c6, 0x2030, 0x160, 0x2039, 0x152, 0x8d, 0x17d, 0x8f,
  0x90, 0x2018, 0x2019, 0x201c, 0x201d, 0x2022, 0x2013, 0x2014, 0x2dc, 0x2122, 0x161, 0x203a, 0x153, 0x9d, 0x17e, 0x178,
];

function fixWindows1252(text: string): string {
  return text.replace(/[\u0080-\u009f]/gu, (c) => String.fromCharCode(WINDOWS_1252_HIGH[c.charCodeAt(0) - 0x80] ?? c.charCodeAt(0)));
}

/** Fatal decode in the declared charset (WHATWG Encoding labels; `latin1` means windows-1252). */
export function decodeBody(bytes: Uint8Array, charset: string | undefined): string {
  const label = charset ?? 'utf-8';
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(label, { fatal: true });
  } catch {
    throw new FusionError('extraction_failed', `unsupported charset ${JSON.stringify(label.slice(0, 40))}`, { details: { charset: label } });
  }
  try {
    const text = decoder.decode(bytes);
    return decoder.encoding === 'windows-1252' ? fixWindows1252(text) : text;
  } catch {
    throw new FusionError('extraction_failed', `response body is not valid ${decoder.encoding}`, { details: { charset: decoder.encoding } });
  }
}

/**
 * One parse with htmlparser2 for either mode: text straight from the parser's events
 * (html-to-text.ts); Markdown through a small tree built from the same events and handed to
 * turndown (markdown-dom.ts). Neither invents <html>/<body>: a page without <body> is converted
 * from the root with <head> dropped.
 */
function convertHtml(text: string, mode: ExtractMode, baseUrl: string, wantLinks: boolean): { content: string; links?: string[] } {
  const options = { baseUrl, ...(wantLinks ? { maxLinks: MAX_LINKS_PER_PAGE } : {}) };
  if (mode === 'text') {
    const converted = htmlToText(text, options);
    return { content: converted.text, ...(converted.links === undefined ? {} : { links: converted.links }) };
  }
  const tree = buildMarkdownTree(text, options);
  return { content: treeToMarkdown(tree.root), ...(tree.links === undefined ? {} : { links: tree.links }) };
}

export function extractContent(input: ExtractInput): ExtractOutput {
  const text = decodeBody(input.body, input.charset);
  let format: ExtractMode;
  let content: string;
  let links: string[] | undefined;
  try {
    // JSON only reaches here through a profile that accepts it (a search provider's answer): as is.
    if (input.mediaType === 'text/plain' || input.mediaType === 'application/json') {
      format = 'text';
      content = text;
    } else if (input.mediaType === 'text/markdown') {
      format = 'markdown';
      content = text;
    } else if (HTML_MEDIA_TYPES.has(input.mediaType)) {
      format = input.extract ?? 'markdown';
      ({ content, links } = convertHtml(text, format, input.baseUrl, input.links === true));
    } else {
      throw new FusionError('unsupported_content_type', `no extractor for ${input.mediaType}`);
    }
  } catch (err) {
    if (isFusionError(err)) throw err;
    throw new FusionError('extraction_failed', `content extraction failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  const cut = truncateUtf8(content, input.maxOutputBytes);
  return { format, content: cut.text, truncated: cut.truncated, ...(input.links === true ? { links: links ?? [] } : {}) };
}
