import { describe, expect, it } from 'vitest';
import { decodeBody, extractContent, type ExtractInput } from '../../../src/egress/extract.js';
import { truncateUtf8 } from '../../../src/egress/utf8-truncate.js';
import { FusionError } from '../../../src/errors.js';

const GOLDEN =
  '<h1>Title</h1><p>Visit <a href="https://example.com/docs">docs</a>.</p><table><tr><th>Name</th><th>Value</th></tr><tr><td>alpha</td><td>one</td></tr></table><pre><code>const x = 1;</code></pre>';

function html(body: string, extra: Partial<ExtractInput> = {}): ExtractInput {
  return { body: Buffer.from(body, 'utf8'), mediaType: 'text/html', baseUrl: 'https://origin.test/dir/page', maxOutputBytes: 32 * 1024, ...extra };
}

function failure(fn: () => unknown): FusionError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(FusionError);
    return err as FusionError;
  }
  throw new Error('expected a failure');
}

describe('extractContent: the golden HTML → Markdown vector (docs/behaviour.md#e3)', () => {
  it('contains every required piece', () => {
    const out = extractContent(html(GOLDEN));
    expect(out.format).toBe('markdown');
    expect(out.truncated).toBe(false);
    expect(out.content).toContain('# Title');
    expect(out.content).toContain('[docs](https://example.com/docs)');
    expect(out.content).toContain('| Name | Value |');
    expect(out.content).toContain('| alpha | one |');
    expect(out.content).toMatch(/```\nconst x = 1;\n```/u);
  });

  it('renders the table as a GFM pipe table with a separator row', () => {
    expect(extractContent(html(GOLDEN)).content).toContain('| Name | Value |\n| --- | --- |\n| alpha | one |');
  });
});

describe('extractContent: HTML', () => {
  it('strips script, style and noscript before converting', () => {
    const out = extractContent(html('<p>keep</p><script>alert("x")</script><style>p{color:red}</style><noscript>enable js</noscript><template><p>tpl</p></template>'));
    expect(out.content).toBe('keep');
  });

  it('uses - bullets, numbered lists from start, atx headings', () => {
    const out = extractContent(html('<h2>Sub</h2><ul><li>a</li><li>b<ul><li>c</li></ul></li></ul><ol start="3"><li>x</li><li>y</li></ol>'));
    expect(out.content).toBe('## Sub\n\n- a\n- b\n  - c\n\n3. x\n4. y');
  });

  it('keeps pipe tables intact with empty cells, pipes and <br> in cells, and <td> header rows', () => {
    const out = extractContent(html('<table><thead><tr><td>a|b</td><td></td></tr></thead><tbody><tr><td>1<br>2</td><td>3</td></tr></tbody></table>'));
    expect(out.content).toBe('| a\\|b |  |\n| --- | --- |\n| 1 2 | 3 |');
  });

  it('makes relative links and images absolute against the final URL (or <base href>)', () => {
    const out = extractContent(html('<p><a href="../up">up</a> <a href="#frag">here</a> <img src="/i.png" alt="pic"></p>'));
    expect(out.content).toContain('[up](https://origin.test/up)');
    expect(out.content).toContain('[here](#frag)');
    expect(out.content).toContain('![pic](https://origin.test/i.png)');
    const based = extractContent(html('<html><head><base href="https://cdn.test/x/"></head><body><a href="y">y</a></body></html>'));
    expect(based.content).toBe('[y](https://cdn.test/x/y)');
  });

  it('produces plain text with block structure when extract is text', () => {
    const out = extractContent(html(`<html><head><title>T</title></head><body>${GOLDEN}<ul><li>one</li><li>two</li></ul><p>a   b\n c</p></body></html>`, { extract: 'text' }));
    expect(out.format).toBe('text');
    expect(out.content).toBe('Title\n\nVisit docs.\n\nName\tValue\nalpha\tone\n\nconst x = 1;\n\none\ntwo\n\na b c');
  });

  it('handles pages without <body> and application/xhtml+xml', () => {
    expect(extractContent(html('<head><title>No</title></head><h1>Frag</h1>')).content).toBe('# Frag');
    const xhtml = extractContent(html('<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body><h1>X</h1></body></html>', { mediaType: 'application/xhtml+xml' }));
    expect(xhtml.content).toBe('# X');
  });
});

describe('extractContent: text/plain and text/markdown are returned as is', () => {
  it('text/plain → format text, ignoring extract', () => {
    const out = extractContent({ body: Buffer.from('<b>not html</b>\n  spaced'), mediaType: 'text/plain', extract: 'markdown', baseUrl: 'http://o.test/', maxOutputBytes: 1000 });
    expect(out).toEqual({ format: 'text', content: '<b>not html</b>\n  spaced', truncated: false });
  });

  it('text/markdown → format markdown, ignoring extract', () => {
    const out = extractContent({ body: Buffer.from('# Heading\n\n- item\n'), mediaType: 'text/markdown', extract: 'text', baseUrl: 'http://o.test/', maxOutputBytes: 1000 });
    expect(out).toEqual({ format: 'markdown', content: '# Heading\n\n- item\n', truncated: false });
  });
});

describe('charset decoding (fatal)', () => {
  it('decodes latin1 / windows-1252 from the Content-Type charset', () => {
    const bytes = Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x20, 0x80]);
    expect(decodeBody(bytes, 'iso-8859-1')).toBe('café €');
    expect(decodeBody(bytes, 'latin1')).toBe('café €');
    expect(extractContent({ body: bytes, mediaType: 'text/plain', charset: 'windows-1252', baseUrl: 'http://o.test/', maxOutputBytes: 100 }).content).toBe('café €');
  });

  it('maps 0x80-0x9F the WHATWG windows-1252 way (Node 20 alone would yield C1 controls)', () => {
    expect(decodeBody(Buffer.from([0x80, 0x81, 0x93, 0x94, 0x9f]), 'windows-1252')).toBe('€\u0081“”Ÿ');
  });

  it('defaults to utf-8 and strips a BOM', () => {
    expect(decodeBody(Buffer.from('\uFEFFhé', 'utf8'), undefined)).toBe('hé');
  });

  it('fails bad UTF-8 with extraction_failed instead of replacement characters', () => {
    const err = failure(() => extractContent({ body: Buffer.from([0x61, 0xff, 0xfe, 0x62]), mediaType: 'text/html', baseUrl: 'http://o.test/', maxOutputBytes: 100 }));
    expect(err.code).toBe('extraction_failed');
    expect(err.message).toContain('utf-8');
    expect(failure(() => decodeBody(Buffer.from([0xc3]), 'utf-8')).code).toBe('extraction_failed');
  });

  it('fails an unknown charset label with extraction_failed', () => {
    expect(failure(() => decodeBody(Buffer.from('x'), 'x-klingon')).code).toBe('extraction_failed');
  });
});

describe('output cap on whole code points', () => {
  it('SPEC vector: 😀😀😀 with cap 5 → 😀', () => {
    expect(truncateUtf8('😀😀😀', 5)).toEqual({ text: '😀', truncated: true });
    const out = extractContent({ body: Buffer.from('😀😀😀'), mediaType: 'text/plain', baseUrl: 'http://o.test/', maxOutputBytes: 5 });
    expect(out).toEqual({ format: 'text', content: '😀', truncated: true });
  });

  it('cuts 2- and 3-byte sequences whole and leaves text at or under the cap alone', () => {
    expect(truncateUtf8('ééé', 3)).toEqual({ text: 'é', truncated: true });
    expect(truncateUtf8('€€', 5)).toEqual({ text: '€', truncated: true });
    expect(truncateUtf8('😀', 3)).toEqual({ text: '', truncated: true });
    expect(truncateUtf8('abc', 3)).toEqual({ text: 'abc', truncated: false });
    expect(truncateUtf8('😀😀', 8)).toEqual({ text: '😀😀', truncated: false });
  });

  it('truncates long extracted Markdown to the byte cap', () => {
    const out = extractContent(html(`<p>${'ü'.repeat(40_000)}</p>`));
    expect(out.truncated).toBe(true);
    expect(Buffer.byteLength(out.content)).toBe(32 * 1024);
  });
});
