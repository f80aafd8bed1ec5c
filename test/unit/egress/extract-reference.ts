/**
 * HTML extraction as it was before the single-parse converters, kept as the oracle of the
 * differential tests: text from a cheerio tree walk; Markdown from cheerio → serialised body →
 * turndown's own parse (domino). The fast converters must give the same output.
 */
import * as cheerio from 'cheerio';
import { createMarkdownService } from '../../../src/egress/html-to-markdown.js';
import { absoluteReference, documentBase, isHttpLink } from '../../../src/egress/link-resolve.js';

interface TextNode {
  type: string;
  name?: string;
  data?: string;
  children?: TextNode[];
}

const PARAGRAPH = new Set([
  'address', 'article', 'aside', 'blockquote', 'details', 'dialog', 'dl', 'fieldset', 'figure', 'footer', 'form',
  'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'header', 'hr', 'main', 'nav', 'ol', 'p', 'pre', 'section', 'table', 'ul',
]);
const LINE = new Set(['body', 'caption', 'dd', 'div', 'dt', 'figcaption', 'html', 'li', 'summary', 'tbody', 'tfoot', 'thead', 'tr']);
const SKIPPED = new Set(['script', 'style', 'noscript', 'template', 'head']);

class TextWriter {
  private readonly parts: string[] = [];
  private tail = '';

  breakLines(count: 1 | 2): void {
    if (this.parts.length === 0) return;
    let have = 0;
    for (let i = this.tail.length - 1; i >= 0 && this.tail[i] === '\n'; i--) have++;
    if (have < count) this.push('\n'.repeat(count - have));
  }

  inline(text: string): void {
    let collapsed = text.replace(/\s+/gu, ' ');
    if (this.parts.length === 0 || this.tail.endsWith('\n') || this.tail.endsWith(' ') || this.tail.endsWith('\t')) {
      collapsed = collapsed.replace(/^ /u, '');
    }
    if (collapsed !== '') this.push(collapsed);
  }

  raw(text: string): void {
    if (text !== '') this.push(text);
  }

  separator(text: string): void {
    if (this.parts.length > 0 && !this.tail.endsWith('\n')) this.push(text);
  }

  private push(text: string): void {
    this.parts.push(text);
    this.tail = (this.tail + text).slice(-2);
  }

  toString(): string {
    return this.parts
      .join('')
      .replace(/[ \t]+\n/gu, '\n')
      .replace(/\n{3,}/gu, '\n\n')
      .trim();
  }
}

function walk(node: TextNode, out: TextWriter, inPre: boolean): void {
  if (node.type === 'text') {
    if (inPre) out.raw(node.data ?? '');
    else out.inline(node.data ?? '');
    return;
  }
  const name = node.name?.toLowerCase();
  if (node.type !== 'tag' && node.type !== 'root') return;
  if (name !== undefined && SKIPPED.has(name)) return;
  if (name === 'br') {
    out.raw('\n');
    return;
  }
  const block = name !== undefined && PARAGRAPH.has(name) ? 2 : name !== undefined && LINE.has(name) ? 1 : 0;
  if (block > 0) out.breakLines(block as 1 | 2);
  if (name === 'td' || name === 'th') out.separator('\t');
  const pre = inPre || name === 'pre';
  for (const child of node.children ?? []) walk(child, out, pre);
  if (block > 0) out.breakLines(block as 1 | 2);
}

export function referenceHtmlToText(html: string, baseUrl: string, maxLinks: number): { text: string; links: string[] } {
  const $ = cheerio.load(html, { xml: { xmlMode: false, decodeEntities: true } });
  $('script, style, noscript, template, title').remove();
  const base = documentBase($('base[href]').first().attr('href'), baseUrl);
  for (const [selector, attribute] of [['a[href]', 'href'], ['img[src]', 'src']] as const) {
    $(selector).each((_, element) => {
      const node = $(element);
      const absolute = absoluteReference(node.attr(attribute) ?? '', base);
      if (absolute !== undefined) node.attr(attribute, absolute);
    });
  }
  const links = new Set<string>();
  $('a[href]').each((_, element) => {
    if (links.size >= maxLinks) return false;
    const href = $(element).attr('href') ?? '';
    if (isHttpLink(href)) links.add(href);
    return undefined;
  });
  const body = $('body').first();
  if (body.length === 0) $('head').remove();
  const root = body.length > 0 ? body.get(0) : $.root().get(0);
  const out = new TextWriter();
  if (root !== undefined) walk(root as unknown as TextNode, out, false);
  return { text: out.toString(), links: [...links] };
}

let markdownService: ReturnType<typeof createMarkdownService> | undefined;

export function referenceHtmlToMarkdown(html: string, baseUrl: string): string {
  const $ = cheerio.load(html, { xml: { xmlMode: false, decodeEntities: true } });
  $('script, style, noscript, template, title').remove();
  const base = documentBase($('base[href]').first().attr('href'), baseUrl);
  for (const [selector, attribute] of [['a[href]', 'href'], ['img[src]', 'src']] as const) {
    $(selector).each((_, element) => {
      const node = $(element);
      const absolute = absoluteReference(node.attr(attribute) ?? '', base);
      if (absolute !== undefined) node.attr(attribute, absolute);
    });
  }
  const body = $('body').first();
  if (body.length === 0) $('head').remove();
  markdownService ??= createMarkdownService();
  return markdownService.turndown((body.length > 0 ? body.html() : $.root().html()) ?? '').trim();
}
