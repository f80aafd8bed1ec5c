/**
 * Markdown from the single-parse tree (markdown-dom.ts) against the former pipeline (cheerio →
 * serialised body → turndown's own domino parse, extract-reference.ts): identical output on the
 * golden vectors, hand-written cases and seeded random well-formed documents.
 */
import { describe, expect, it } from 'vitest';
import { buildMarkdownTree } from '../../../src/egress/markdown-dom.js';
import { treeToMarkdown } from '../../../src/egress/html-to-markdown.js';
import { referenceHtmlToMarkdown } from './extract-reference.js';

const BASE = 'https://origin.test/dir/page';

function same(html: string): void {
  const expected = referenceHtmlToMarkdown(html, BASE);
  const actual = treeToMarkdown(buildMarkdownTree(html, { baseUrl: BASE }).root);
  expect({ html, markdown: actual }).toEqual({ html, markdown: expected });
}

const CASES = [
  '',
  'plain words only',
  '<h1>Title</h1><p>Visit <a href="https://example.com/docs">docs</a>.</p><table><tr><th>Name</th><th>Value</th></tr><tr><td>alpha</td><td>one</td></tr></table><pre><code>const x = 1;</code></pre>',
  '<p>keep</p><script>alert("x")</script><style>p{color:red}</style><noscript>enable js</noscript><template><p>tpl</p></template>',
  '<h2>Sub</h2><ul><li>a</li><li>b<ul><li>c</li></ul></li></ul><ol start="3"><li>x</li><li>y</li></ol>',
  '<table><thead><tr><td>a|b</td><td></td></tr></thead><tbody><tr><td>1<br>2</td><td>3</td></tr></tbody></table>',
  '<p><a href="../up">up</a> <a href="#frag">here</a> <img src="/i.png" alt="pic"></p>',
  '<html><head><base href="https://cdn.test/x/"></head><body><a href="y">y</a></body></html>',
  '<head><title>No</title></head><h1>Frag</h1>',
  '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body><h1>X</h1></body></html>',
  '<html><head><title>T</title></head><body><h1>Title</h1><p>Visit <a href="https://example.com/docs">docs</a>.</p><ul><li>one</li><li>two</li></ul><p>a   b\n c</p></body></html>',
  '<p>a <em>em</em> <strong>strong</strong> <code>co`de</code> <i> </i> <b></b> x_y*z [br] #1. +</p><hr><blockquote><p>q1</p><p>q2</p></blockquote>',
  '<pre><code class="language-js">```\nfence inside\n```</code></pre><pre>plain pre\n  indented</pre>',
  '<p>text with <a href="/p a t h" title="T &quot;q&quot;">spaced link</a> and <a>no href</a> and <a href="">empty</a></p>',
  '<div><div>nested <span>inline</span></div>text<p>para</p>tail</div>\n\n  <p>  spaces  \n around </p>',
  '<table><tr><td>1</td></tr><tr><td>2</td></tr></table><table><caption>Cap</caption><tr><th>h</th></tr></table>',
  '<ul><li><p>para item</p></li><li>plain</li></ul><ol><li>one<ol><li>inner</li></ol></li></ol>',
  '<p>entities &amp; &lt;tag&gt; &nbsp;nbsp&nbsp; caf&eacute; &#x1F600;</p>',
  '<h3>a <a href="/h">link in heading</a></h3><h6>six</h6><p>line<br>break<br></p>',
  '<td>stray cell</td><tr>stray row</tr><p>a <th>h</th> b</p><caption>c</caption>',
  '<dl><dt>term</dt><dd>def</dd></dl><figure><img src="f.png" alt="a [b]" title="t"><figcaption>cap</figcaption></figure>',
];

describe('treeToMarkdown equals the former Markdown pipeline', () => {
  it.each(CASES.map((html) => [html]))('%j', (html) => same(html));
});

function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ['word', 'two words', ' lead', 'trail ', '  ', '\n', 'a_b', 'x*y', '#5', '1. one', '- dash', '&amp;', '&nbsp;', '`tick`', 'é😀', '[b]'];
const INLINE = ['span', 'a', 'b', 'strong', 'em', 'i', 'code'];
const BLOCK = ['div', 'p', 'section', 'h1', 'h2', 'h4', 'blockquote', 'ul', 'ol', 'table', 'pre', 'br', 'hr', 'img', 'script', 'noscript'];

/** A well-formed random document: proper nesting, valid list and table structure, no <p> holding blocks. */
function randomDocument(random: () => number): string {
  const pick = <T,>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;
  // An <a> never holds another <a> (invalid HTML, which an HTML5 parser re-arranges).
  const inline = (depth: number, inLink = false): string => {
    const parts: string[] = [];
    const count = 1 + Math.floor(random() * 4);
    for (let i = 0; i < count; i++) {
      if (depth > 2 || random() < 0.55) parts.push(pick(WORDS));
      else {
        const tag = pick(inLink ? INLINE.filter((t) => t !== 'a') : INLINE);
        const attrs = tag === 'a' ? ` href="${pick(['/a', 'b c', '#f', 'https://x.test/y', ''])}"` : '';
        parts.push(`<${tag}${attrs}>${tag === 'code' ? pick(WORDS) : inline(depth + 1, inLink || tag === 'a')}</${tag}>`);
      }
    }
    return parts.join('');
  };
  const block = (depth: number): string => {
    const tag = depth > 3 ? 'p' : pick(BLOCK);
    switch (tag) {
      case 'ul':
      case 'ol':
        return `<${tag}>${Array.from({ length: 1 + Math.floor(random() * 3) }, () => `<li>${random() < 0.3 ? block(depth + 1) : inline(0)}</li>`).join('')}</${tag}>`;
      case 'table': {
        const cols = 1 + Math.floor(random() * 3);
        const row = (cell: string): string => `<tr>${Array.from({ length: cols }, () => `<${cell}>${random() < 0.2 ? '' : inline(1)}</${cell}>`).join('')}</tr>`;
        const rows = Array.from({ length: 1 + Math.floor(random() * 3) }, () => row('td')).join('');
        return random() < 0.5 ? `<table>${row('th')}${rows}</table>` : `<table><thead>${row('th')}</thead><tbody>${rows}</tbody></table>`;
      }
      case 'pre':
        return random() < 0.5 ? `<pre><code>${pick(WORDS)}\n${pick(WORDS)}</code></pre>` : `<pre>${inline(1)}</pre>`;
      case 'br':
      case 'hr':
        return `<${tag}>`;
      case 'img':
        return `<img src="${pick(['/i.png', 'x y.png'])}" alt="${pick(['alt', '', 'a_b'])}">`;
      case 'script':
        return '<script>var x = "<p>no</p>";</script>';
      case 'noscript':
        return `<noscript>${inline(0)}</noscript>`;
      case 'p':
      case 'h1':
      case 'h2':
      case 'h4':
        return `<${tag}>${inline(0)}</${tag}>`;
      default:
        return `<${tag}>${Array.from({ length: 1 + Math.floor(random() * 3) }, () => (random() < 0.3 ? inline(0) : block(depth + 1))).join(random() < 0.5 ? '\n' : '')}</${tag}>`;
    }
  };
  const body = Array.from({ length: 1 + Math.floor(random() * 6) }, () => block(0)).join(random() < 0.5 ? '\n  ' : '');
  return random() < 0.5 ? `<html><head><title>t</title></head><body>${body}</body></html>` : body;
}

describe('treeToMarkdown on seeded random well-formed documents', () => {
  it('matches on 1500 documents', () => {
    const random = prng(7);
    for (let i = 0; i < 1500; i++) same(randomDocument(random));
  });
});
