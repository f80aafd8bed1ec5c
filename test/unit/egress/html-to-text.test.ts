/**
 * The single-pass HTML → text converter against the former tree-walking one (text-reference.ts):
 * identical text and links on hand-written edge cases and on a few thousand seeded random
 * documents full of malformed markup.
 */
import { describe, expect, it } from 'vitest';
import { htmlToText } from '../../../src/egress/html-to-text.js';
import { referenceHtmlToText } from './extract-reference.js';

const BASE = 'https://origin.test/dir/page';
const MAX_LINKS = 50;

function same(html: string): void {
  const expected = referenceHtmlToText(html, BASE, MAX_LINKS);
  const actual = htmlToText(html, { baseUrl: BASE, maxLinks: MAX_LINKS });
  expect({ html, ...actual }).toEqual({ html, text: expected.text, links: expected.links });
}

const CASES = [
  '',
  'plain words only',
  '<h1>Title</h1><p>Visit <a href="https://example.com/docs">docs</a>.</p><table><tr><th>Name</th><th>Value</th></tr><tr><td>alpha</td><td>one</td></tr></table><pre><code>const x = 1;</code></pre>',
  '<html><head><title>T</title><a href="/in-head">h</a></head><body><p>a   b\n c</p><ul><li>one</li><li>two</li></ul></body></html>',
  '<p>keep</p><script>alert("x")</script><style>p{color:red}</style><noscript>enable js <a href="/ns">x</a></noscript><template><p>tpl</p><body>no</body></template>',
  '<head><title>No</title></head><h1>Frag</h1> tail text',
  '<html><head><base href="https://cdn.test/x/"></head><body><a href="y">y</a><a href="#frag">f</a><a href=" ../z ">z</a></body></html>',
  '<body><a href="rel">before base</a><base href="https://late.test/b/"></body>',
  '<noscript><base href="https://ignored.test/"></noscript><a href="k">k</a>',
  '<base href="ftp://x.test/"><a href="k">k</a><a href="mailto:a@b.c">m</a><a href="javascript:void(0)">j</a><a href="http://[bad">bad</a>',
  '<head><div><body><p>body inside head</p></body></div></head><p>after</p>',
  '<body><p>first body</p></body><body><p>second body</p></body>',
  'before<body>inside</body>after',
  '<p>one<p>two<div>three</div></p></p>x</br>y<br/>z',
  '<pre>  keep\n   spaces <b>bold</b>\n</pre>after   pre',
  '<table><caption>Cap</caption><thead><tr><th>a</th><td>b</td></tr></thead><tr><td></td><td>c</td></tr></table>text',
  '<div>a<span> b </span> c&nbsp;&nbsp;d&amp;e&lt;f&#x27;g&unknown;h</div>',
  '<ul><li>a<li>b<ul><li>c</ul></ul><dl><dt>t<dd>d</dl>',
  '<svg><title>svg title</title><a href="/svg-link"/><text>svg text</text></svg><math><mi>x</mi></math>',
  '<!doctype html><!-- c --><![CDATA[cdata]]><?pi x?><P>Upper <A HREF="/UP">case</A></P>',
  '<title>in body</title><p>x<title>nested title</title>y</p>',
  '<textarea><p>not a tag</p></textarea><xmp><b>x</b></xmp>',
  '<td>cell outside table</td><tr><td>row</td></tr>',
  '\t\n  <p>\n\n leading</p>\n\n\n<p>trailing \n\t</p>  ',
  '<a href="/a">1</a><a href="/a">dup</a><a href="/b?x=1&amp;y=2">2</a>',
  '<h2>Sub</h2><ol start="3"><li>x</li><li>y</li></ol><hr><blockquote>q</blockquote>',
];

describe('htmlToText equals the tree-walking converter', () => {
  it.each(CASES.map((html) => [html]))('%j', (html) => same(html));

  it('without links asked for, returns text only', () => {
    expect(htmlToText('<a href="/x">x</a>', { baseUrl: BASE })).toEqual({ text: 'x' });
  });

  it('caps links', () => {
    const html = Array.from({ length: 80 }, (_, i) => `<a href="/l${String(i)}">${String(i)}</a>`).join('');
    expect(htmlToText(html, { baseUrl: BASE, maxLinks: 50 }).links).toHaveLength(50);
    same(html);
  });
});

/** Small seeded PRNG (mulberry32), so a failure is reproducible. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const TAGS = [
  'p', 'div', 'span', 'a', 'b', 'i', 'em', 'strong', 'ul', 'ol', 'li', 'table', 'tr', 'td', 'th', 'tbody', 'thead', 'caption', 'pre', 'code', 'br', 'hr',
  'h1', 'h2', 'h3', 'section', 'article', 'nav', 'header', 'footer', 'main', 'blockquote', 'dl', 'dt', 'dd', 'img', 'script', 'style', 'noscript',
  'template', 'title', 'head', 'body', 'html', 'base', 'svg', 'form', 'figure', 'figcaption', 'details', 'summary', 'textarea', 'option', 'select',
];
const TEXTS = [' ', '  ', '\n', '\t', 'word', ' two words ', '&amp;', '&nbsp;', '&lt;b&gt;', 'x\n\ny', '\u00a0', 'é😀', '  \n  lead', 'trail \n '];
const HREFS = ['/a', 'rel/b', '#f', '', ' ', 'https://o.test/x', 'http://[bad', 'mailto:x@y', '../up?q=1&amp;r=2', 'HTTPS://UP.TEST/Y'];

function randomDocument(random: () => number): string {
  const pick = <T,>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;
  const parts: string[] = [];
  const count = 5 + Math.floor(random() * 60);
  for (let i = 0; i < count; i++) {
    const roll = random();
    if (roll < 0.35) parts.push(pick(TEXTS));
    else if (roll < 0.7) {
      const tag = pick(TAGS);
      const attrs = tag === 'a' ? ` href="${pick(HREFS)}"` : tag === 'base' ? ` href="${pick(['https://b.test/d/', 'x/', 'ftp://no/'])}"` : '';
      parts.push(`<${random() < 0.1 ? tag.toUpperCase() : tag}${attrs}${random() < 0.05 ? '/' : ''}>`);
    } else if (roll < 0.93) parts.push(`</${pick(TAGS)}>`);
    else parts.push(pick(['<!-- c -->', '<![CDATA[d]]>', '<!doctype html>', '<?x y?>', '<', '>', '</', '<a', '&']));
  }
  return parts.join('');
}

describe('htmlToText on seeded random documents', () => {
  it('matches on 3000 documents', () => {
    const random = prng(20261201);
    for (let i = 0; i < 3000; i++) same(randomDocument(random));
  });
});
