/**
 * HTML → Markdown with turndown (docs/behaviour.md#e3): atx headings, fenced code, `-` bullets, and tables
 * as GFM pipe tables through the small rule set below (turndown has no table support of its own
 * and turndown-plugin-gfm is not a dependency).
 *
 * Pipe tables need a header row: the first row of every table is emitted as the header, whether
 * it holds <th> or <td> cells. Cell text is flattened to one line and `|` is escaped.
 */
import TurndownService from 'turndown';
import type { LightElement } from './markdown-dom.js';

/** Minimal DOM surface turndown hands to rules (domino nodes; the DOM lib is not loaded). */
interface DomNode {
  nodeName: string;
  parentNode: DomNode | null;
  nextSibling: DomNode | null;
  childNodes: ArrayLike<DomNode>;
  getAttribute?: (name: string) => string | null;
  getElementsByTagName?: (name: string) => ArrayLike<DomNode>;
}

const CELL_TAGS = new Set(['TH', 'TD']);
/** Could one of turndown's Markdown escapes apply? (Anywhere: \ * ` [ ] _; at the start: - + = # ~ > or a digit.) */
const NEEDS_ESCAPE = /[\\*`[\]_]|^[-+=#~>\d]/u;

function dom(node: unknown): DomNode {
  return node as DomNode;
}

function closest(node: DomNode, tag: string): DomNode | undefined {
  for (let current = node.parentNode; current !== null; current = current.parentNode) {
    if (current.nodeName === tag) return current;
  }
  return undefined;
}

function cellCount(row: DomNode): number {
  return Array.from(row.childNodes).filter((child) => CELL_TAGS.has(child.nodeName)).length;
}

/**
 * The first row of each table, found once: asking the table for its rows again on every row made
 * a 20 000-row table quadratic. The tree does not change while turndown converts it.
 */
const firstRows = new WeakMap<DomNode, DomNode | undefined>();

function isFirstRow(row: DomNode): boolean {
  const table = closest(row, 'TABLE');
  if (table === undefined) return false;
  if (!firstRows.has(table)) firstRows.set(table, table.getElementsByTagName?.('tr')[0]);
  return firstRows.get(table) === row;
}

function cell(content: string): string {
  const flat = content.replace(/\s*\n\s*/gu, ' ').replace(/\|/gu, '\\|').trim();
  return ` ${flat} |`;
}

function listItem(content: string, node: DomNode, options: TurndownService.Options): string {
  let prefix = `${options.bulletListMarker ?? '-'} `;
  const parent = node.parentNode;
  if (parent?.nodeName === 'OL') {
    const start = Number(parent.getAttribute?.('start') ?? '1');
    const index = Array.from(parent.childNodes).filter((child) => child.nodeName === 'LI').indexOf(node);
    prefix = `${String((Number.isFinite(start) ? start : 1) + Math.max(index, 0))}. `;
  }
  const body = content.replace(/^\n+/u, '').replace(/\n+$/u, '\n').replace(/\n/gmu, `\n${' '.repeat(prefix.length)}`);
  return prefix + body + (node.nextSibling !== null && !/\n$/u.test(body) ? '\n' : '');
}

export function createMarkdownService(): TurndownService {
  const service = new TurndownService({
    headingStyle: 'atx',
    codeBlockStyle: 'fenced',
    fence: '```',
    bulletListMarker: '-',
    emDelimiter: '_',
    strongDelimiter: '**',
    // An empty cell is "blank" to turndown, which would otherwise break the row into paragraphs.
    blankReplacement: (_content, node) => {
      const name = dom(node).nodeName;
      if (CELL_TAGS.has(name)) return ' |';
      return (node as unknown as { isBlock?: boolean }).isBlock === true ? '\n\n' : '';
    },
  });
  // Most text needs no escaping; turndown runs 13 regular expressions over every text node
  // regardless. Skip them when none can match (same output, checked by the differential test).
  const escapeAll = service.escape.bind(service);
  service.escape = (text: string): string => (NEEDS_ESCAPE.test(text) ? escapeAll(text) : text);
  service.remove(['script', 'style', 'noscript']);
  service.addRule('listItem', { filter: 'li', replacement: (content, node, options) => listItem(content, dom(node), options) });
  service.addRule('tableCell', { filter: ['th', 'td'], replacement: (content) => cell(content) });
  service.addRule('tableRow', {
    filter: 'tr',
    replacement: (content, node) => {
      const row = dom(node);
      const line = `\n|${content}`;
      if (!isFirstRow(row)) return `${line}\n`;
      return `${line}\n|${' --- |'.repeat(Math.max(cellCount(row), 1))}\n`;
    },
  });
  service.addRule('tableSection', { filter: ['thead', 'tbody', 'tfoot'], replacement: (content) => content });
  service.addRule('tableCaption', { filter: 'caption', replacement: (content) => `\n\n${content.trim()}\n\n` });
  service.addRule('table', { filter: 'table', replacement: (content) => `\n\n${content.replace(/^\n+|\n+$/gu, '')}\n\n` });
  return service;
}

let shared: TurndownService | undefined;

/** Converts a tree from markdown-dom.ts (its root's children); the service is built once per thread. */
export function treeToMarkdown(root: LightElement): string {
  shared ??= createMarkdownService();
  // The light tree offers the part of the DOM turndown reads (see markdown-dom.ts).
  return shared.turndown(root as unknown as TurndownService.Node).trim();
}
