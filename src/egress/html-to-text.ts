/**
 * HTML → plain text over a parsed (cheerio/domhandler) tree: block elements become line breaks,
 * runs of whitespace collapse to one space, <pre> keeps its text, table cells are separated by
 * a tab and rows by a newline. Scripts, styles and noscript are expected to be removed already.
 */

/** The domhandler node shape this walker needs (kept structural: domhandler is not a direct dependency). */
export interface TextNode {
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

  /** Ensures the output ends with `count` newlines (never at the very start). */
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
  if (node.type !== 'tag' && node.type !== 'root') return; // comments, directives, CDATA, script/style nodes
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

export function htmlTreeToText(root: TextNode): string {
  const out = new TextWriter();
  walk(root, out, false);
  return out.toString();
}
