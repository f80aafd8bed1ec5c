/**
 * HTML → plain text (and, for a crawler, the page's links) in ONE pass over htmlparser2's
 * events, with no DOM: block elements become line breaks, runs of whitespace collapse to one
 * space, <pre> keeps its text, table cells are separated by a tab and rows by a newline.
 *
 * Building a tree (cheerio/domhandler) and walking it cost about 2–3× the parse itself; the
 * events carry everything this needs. The result is the same as walking the tree htmlparser2
 * would build with the same options (domhandler builds it from these very events), which a
 * differential test checks against the former tree-walking converter:
 * - script, style, noscript, template and title subtrees are dropped wherever they are, and
 *   their contents never count (no text, no link, no <base>, no <body>);
 * - the text is that of the first <body> element; a page without one is read from the root,
 *   <head> subtrees dropped;
 * - links: <a href> in document order, made absolute against the first <base href> (or the
 *   final URL; link-resolve.ts), http(s) only, deduplicated, at most `maxLinks`. A <base> may
 *   come after the links it governs, so they are resolved at the end.
 */
import { Parser } from 'htmlparser2';
import { absoluteReference, documentBase, isHttpLink } from './link-resolve.js';

const PARAGRAPH = new Set([
  'address', 'article', 'aside', 'blockquote', 'details', 'dialog', 'dl', 'fieldset', 'figure', 'footer', 'form',
  'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'header', 'hr', 'main', 'nav', 'ol', 'p', 'pre', 'section', 'table', 'ul',
]);
const LINE = new Set(['body', 'caption', 'dd', 'div', 'dt', 'figcaption', 'html', 'li', 'summary', 'tbody', 'tfoot', 'thead', 'tr']);
/** Subtrees removed before anything else looks at the page. */
const REMOVED = new Set(['script', 'style', 'noscript', 'template', 'title']);
/** Subtrees the text never includes (the removed ones, and <head>). */
const SKIPPED = new Set([...REMOVED, 'head']);
const WHITESPACE_RUN = /\s+/gu;

class TextWriter {
  private readonly parts: string[] = [];
  /** The last two characters written (enough for every look-back below). */
  private tail = '';

  /** Ensures the output ends with `count` newlines (never at the very start). */
  breakLines(count: 1 | 2): void {
    if (this.parts.length === 0) return;
    let have = 0;
    for (let i = this.tail.length - 1; i >= 0 && this.tail[i] === '\n'; i--) have++;
    if (have < count) this.push('\n'.repeat(count - have));
  }

  inline(text: string): void {
    let collapsed = text.replace(WHITESPACE_RUN, ' ');
    if (collapsed.startsWith(' ') && (this.parts.length === 0 || this.tail.endsWith('\n') || this.tail.endsWith(' ') || this.tail.endsWith('\t'))) {
      collapsed = collapsed.slice(1);
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
    this.tail = text.length >= 2 ? text.slice(-2) : (this.tail + text).slice(-2);
  }

  toString(): string {
    return this.parts
      .join('')
      .replace(/[ \t]+\n/gu, '\n')
      .replace(/\n{3,}/gu, '\n\n')
      .trim();
  }
}

/** The text of one subtree (the first <body>, or the root), fed element by element. */
class TextWalker {
  readonly out = new TextWriter();
  /** Per open element: its block kind (0 inline, 1 line, 2 paragraph), +4 when it is <pre>. */
  private readonly stack: number[] = [];
  /** Open elements inside a skipped subtree (0: not skipping). */
  private skipping = 0;
  private pre = 0;

  open(name: string): void {
    if (this.skipping > 0 || SKIPPED.has(name)) {
      this.skipping += 1;
      return;
    }
    if (name === 'br') {
      this.out.raw('\n');
      this.stack.push(0);
      return;
    }
    const block = PARAGRAPH.has(name) ? 2 : LINE.has(name) ? 1 : 0;
    if (block > 0) this.out.breakLines(block as 1 | 2);
    if (name === 'td' || name === 'th') this.out.separator('\t');
    const isPre = name === 'pre';
    if (isPre) this.pre += 1;
    this.stack.push(block + (isPre ? 4 : 0));
  }

  close(): void {
    if (this.skipping > 0) {
      this.skipping -= 1;
      return;
    }
    const kind = this.stack.pop() ?? 0;
    if (kind >= 4) this.pre -= 1;
    const block = kind & 3;
    if (block > 0) this.out.breakLines(block as 1 | 2);
  }

  text(data: string): void {
    if (this.skipping > 0) return;
    if (this.pre > 0) this.out.raw(data);
    else this.out.inline(data);
  }
}

export interface HtmlText {
  text: string;
  /** Present when asked for. */
  links?: string[];
}

export function htmlToText(html: string, options: { baseUrl: string; maxLinks?: number }): HtmlText {
  const wantLinks = options.maxLinks !== undefined;
  const maxLinks = options.maxLinks ?? 0;
  const root = new TextWalker();
  let body: TextWalker | undefined;
  /** Open elements of the first <body>, itself included; -1 once it closed. */
  let bodyDepth = 0;
  /** Open elements inside a removed subtree. */
  let removed = 0;
  let declaredBase: string | undefined;
  const hrefs: string[] = [];

  const parser = new Parser(
    {
      onopentag(name, attribs) {
        if (removed > 0 || REMOVED.has(name)) removed += 1;
        if (removed === 0) {
          if (name === 'a' && wantLinks && attribs.href !== undefined) hrefs.push(attribs.href);
          else if (name === 'base' && declaredBase === undefined && attribs.href !== undefined) declaredBase = attribs.href;
          else if (name === 'body' && body === undefined) body = new TextWalker();
        }
        if (body === undefined) root.open(name);
        else if (bodyDepth >= 0) {
          bodyDepth += 1;
          body.open(name);
        }
      },
      onclosetag() {
        if (removed > 0) removed -= 1;
        if (body === undefined) root.close();
        else if (bodyDepth > 0) {
          body.close();
          bodyDepth -= 1;
          if (bodyDepth === 0) bodyDepth = -1;
        }
      },
      ontext(data) {
        if (body === undefined) root.text(data);
        else if (bodyDepth > 0) body.text(data);
      },
    },
    { xmlMode: false, decodeEntities: true },
  );
  parser.end(html);

  const text = (body ?? root).out.toString();
  if (!wantLinks) return { text };
  const base = documentBase(declaredBase, options.baseUrl);
  const links = new Set<string>();
  for (const href of hrefs) {
    if (links.size >= maxLinks) break;
    const absolute = absoluteReference(href, base) ?? href;
    if (isHttpLink(absolute)) links.add(absolute);
  }
  return { text, links: [...links] };
}
