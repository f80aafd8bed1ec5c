/**
 * A minimal DOM for turndown, built straight from htmlparser2's events.
 *
 * Before this, Markdown extraction parsed the page with cheerio, serialised the body back to
 * HTML and had turndown parse that again with domino (a full HTML5 DOM), then walked it; most
 * of the time went to the second parse, domino's DOM and the garbage both left behind. Here the
 * page is parsed once and turndown walks these small nodes instead. They offer exactly what
 * turndown and our rules (html-to-markdown.ts) use: node types and names, parent/sibling/child
 * links, `data`/`nodeValue`, `textContent`, `getAttribute`, `getElementsByTagName`,
 * `removeChild`, `children`/`lastElementChild`, and `cloneNode`, which returns the node itself
 * (the tree is built for one conversion, so turndown's defensive copy is skipped).
 *
 * The tree is the one domino would have built from the serialised body for ordinary markup:
 * scripts, styles, noscript, template and title are dropped while building (their neighbouring
 * text merges, as it did after the round trip); comments and doctypes are left out (turndown
 * drops them); adjacent text is one node; a <tr> directly in a <table> goes into an implied
 * <tbody>, and table parts outside any table are left out (their content kept), as an HTML5
 * parser does. Badly broken markup (misnested formatting, text inside a
 * table) may still be arranged differently than domino would; the Markdown golden tests and a
 * differential test over well-formed pages pin the output.
 */
import { Parser } from 'htmlparser2';
import { absoluteReference, documentBase, isHttpLink } from './link-resolve.js';

const TEXT_NODE = 3;
const ELEMENT_NODE = 1;
const DOCUMENT_FRAGMENT_NODE = 11;

abstract class LightNode {
  abstract readonly nodeType: number;
  abstract readonly nodeName: string;
  parentNode: LightElement | null = null;
  nextSibling: LightNode | null = null;
  previousSibling: LightNode | null = null;
  abstract get textContent(): string;

  cloneNode(): this {
    return this;
  }
}

export class LightText extends LightNode {
  readonly nodeType = TEXT_NODE;
  readonly nodeName = '#text';

  constructor(private text: string) {
    super();
  }

  get data(): string {
    return this.text;
  }

  set data(value: string) {
    this.text = value;
    this.parentNode?.invalidate();
  }

  get nodeValue(): string {
    return this.text;
  }

  get textContent(): string {
    return this.text;
  }

  /** Builder only: text split by the parser (entities) is one node. */
  append(more: string): void {
    this.text += more;
  }
}

export class LightElement extends LightNode {
  readonly nodeType: number = ELEMENT_NODE;
  readonly childNodes: LightNode[] = [];
  private text: string | undefined;

  constructor(
    readonly nodeName: string,
    readonly attribs: Record<string, string>,
  ) {
    super();
  }

  get firstChild(): LightNode | null {
    return this.childNodes[0] ?? null;
  }

  get lastChild(): LightNode | null {
    return this.childNodes[this.childNodes.length - 1] ?? null;
  }

  get children(): LightElement[] {
    return this.childNodes.filter((child): child is LightElement => child instanceof LightElement);
  }

  get lastElementChild(): LightElement | null {
    for (let i = this.childNodes.length - 1; i >= 0; i--) {
      const child = this.childNodes[i];
      if (child instanceof LightElement) return child;
    }
    return null;
  }

  /** Memoised: turndown asks every node for it, several times; edits clear it up the chain. */
  get textContent(): string {
    if (this.text === undefined) {
      let text = '';
      for (const child of this.childNodes) text += child.textContent;
      this.text = text;
    }
    return this.text;
  }

  getAttribute(name: string): string | null {
    return this.attribs[name] ?? null;
  }

  getElementsByTagName(name: string): LightElement[] {
    const wanted = name.toUpperCase();
    const found: LightElement[] = [];
    const visit = (element: LightElement): void => {
      for (const child of element.childNodes) {
        if (!(child instanceof LightElement)) continue;
        if (child.nodeName === wanted) found.push(child);
        visit(child);
      }
    };
    visit(this);
    return found;
  }

  appendChild(child: LightNode): void {
    const last = this.lastChild;
    if (last !== null) {
      last.nextSibling = child;
      child.previousSibling = last;
    }
    child.parentNode = this;
    this.childNodes.push(child);
  }

  removeChild(child: LightNode): LightNode {
    const index = this.childNodes.indexOf(child);
    if (index < 0) return child;
    this.childNodes.splice(index, 1);
    if (child.previousSibling !== null) child.previousSibling.nextSibling = child.nextSibling;
    if (child.nextSibling !== null) child.nextSibling.previousSibling = child.previousSibling;
    child.parentNode = null;
    child.previousSibling = null;
    child.nextSibling = null;
    this.invalidate();
    return child;
  }

  /** Forgets the memoised text here and in every ancestor that still holds one. */
  invalidate(): void {
    if (this.text === undefined) return;
    this.text = undefined;
    this.parentNode?.invalidate();
  }
}

/** The root turndown converts: only its children count. */
class LightFragment extends LightElement {
  override readonly nodeType = DOCUMENT_FRAGMENT_NODE;
}

/** Subtrees dropped while building. */
const REMOVED = new Set(['script', 'style', 'noscript', 'template', 'title']);
/** Table parts an HTML5 parser ignores outside a table (their content stays, the tags go). */
const TABLE_PARTS = new Set(['caption', 'col', 'colgroup', 'tbody', 'td', 'tfoot', 'th', 'thead', 'tr']);

export interface MarkdownTree {
  /** What to convert: the first <body>, or the document without <head>. */
  root: LightElement;
  /** Absolute http(s) <a href> links in document order (when asked for). */
  links?: string[];
}

/**
 * Parses `html` into the turndown-ready tree: removed subtrees dropped, <a href> and <img src>
 * made absolute against the first <base href> or `baseUrl`.
 */
export function buildMarkdownTree(html: string, options: { baseUrl: string; maxLinks?: number }): MarkdownTree {
  const document = new LightFragment('#document-fragment', {});
  const stack: LightElement[] = [document];
  let removed = 0;
  /** Open <table> elements. */
  let tables = 0;
  let body: LightElement | undefined;
  let declaredBase: string | undefined;
  const anchors: LightElement[] = [];
  const images: LightElement[] = [];
  /** Implied <tbody> per table, reused by its later rows. */
  const implied = new WeakMap<LightElement, LightElement>();

  const parser = new Parser(
    {
      onopentag(name, attribs) {
        if (removed > 0 || REMOVED.has(name)) {
          removed += 1;
          return;
        }
        let parent = stack[stack.length - 1] as LightElement;
        if (tables === 0 && TABLE_PARTS.has(name)) {
          // Ignored tag: its children go to the current parent; the parent is pushed again so
          // the matching close event pops something.
          stack.push(parent);
          return;
        }
        if (name === 'table') tables += 1;
        const element = new LightElement(name.toUpperCase(), attribs);
        if (element.nodeName === 'TR' && parent.nodeName === 'TABLE') {
          let section = implied.get(parent);
          if (section === undefined || parent.lastChild !== section) {
            section = new LightElement('TBODY', {});
            parent.appendChild(section);
            implied.set(parent, section);
          }
          parent = section;
        }
        parent.appendChild(element);
        stack.push(element);
        if (name === 'a' && attribs.href !== undefined) anchors.push(element);
        else if (name === 'img' && attribs.src !== undefined) images.push(element);
        else if (name === 'base' && declaredBase === undefined && attribs.href !== undefined) declaredBase = attribs.href;
        else if (name === 'body' && body === undefined) body = element;
      },
      onclosetag(name) {
        if (removed > 0) {
          removed -= 1;
          return;
        }
        if (name === 'table' && tables > 0) tables -= 1;
        stack.pop();
      },
      ontext(data) {
        if (removed > 0) return;
        const parent = stack[stack.length - 1] as LightElement;
        const last = parent.lastChild;
        if (last instanceof LightText) last.append(data);
        else parent.appendChild(new LightText(data));
      },
    },
    { xmlMode: false, decodeEntities: true },
  );
  parser.end(html);

  const base = documentBase(declaredBase, options.baseUrl);
  for (const [elements, attribute] of [[anchors, 'href'], [images, 'src']] as const) {
    for (const element of elements) {
      const absolute = absoluteReference(element.attribs[attribute] ?? '', base);
      if (absolute !== undefined) element.attribs[attribute] = absolute;
    }
  }
  let links: string[] | undefined;
  if (options.maxLinks !== undefined) {
    const unique = new Set<string>();
    for (const anchor of anchors) {
      if (unique.size >= options.maxLinks) break;
      const href = anchor.attribs.href ?? '';
      if (isHttpLink(href)) unique.add(href);
    }
    links = [...unique];
  }
  if (body === undefined) {
    for (const head of document.getElementsByTagName('head')) head.parentNode?.removeChild(head);
  }
  return { root: body ?? document, ...(links === undefined ? {} : { links }) };
}
