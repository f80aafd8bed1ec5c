/** The auto-escaping template: every interpolation is text, in element and in attribute context. */
import { describe, expect, it } from 'vitest';
import { escapeHtml, hrefTo, html, join } from '../../../src/dashboard/html.js';

const HOSTILE = `<script>document.title='pwned'</script><img src=x onerror="alert(1)">'"\`&amp;</pre>`;

describe('html', () => {
  it('escapes interpolated text so no tag or entity survives', () => {
    const out = html`<p>${HOSTILE}</p>`.text;
    expect(out).not.toMatch(/<script|<img|<\/pre>/iu);
    expect(out).toBe(`<p>&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&#39;&quot;&#96;&amp;amp;&lt;/pre&gt;</p>`);
  });
  it('escapes quotes so a value cannot leave a quoted attribute (double or single)', () => {
    const v = `" onmouseover="alert(1)`;
    expect(html`<a title="${v}">x</a>`.text).toBe('<a title="&quot; onmouseover=&quot;alert(1)">x</a>');
    expect(html`<a title='${"' onfocus='x"}'>x</a>`.text).toBe(`<a title='&#39; onfocus=&#39;x'>x</a>`);
  });
  it('nests markup built by html without escaping it again, and escapes arrays item by item', () => {
    const inner = html`<b>${'<i>'}</b>`;
    expect(html`<p>${inner}${['<', html`<br>`]}</p>`.text).toBe('<p><b>&lt;i&gt;</b>&lt;<br></p>');
  });
  it('cannot be fooled by an object that looks like markup', () => {
    const forged = { text: '<script>x</script>' } as unknown as string;
    expect(html`${forged}`.text).toBe('[object Object]');
    const spoof = JSON.parse('{"text":"<script>x</script>"}') as string;
    expect(html`${spoof}`.text).not.toContain('<script');
  });
  it('renders null, undefined and false as nothing, numbers as text', () => {
    expect(html`${null}${undefined}${false}${0}${12}`.text).toBe('012');
  });
  it('joins with an escaped separator', () => {
    expect(join(['a', html`<b>b</b>`], '<>').text).toBe('a&lt;&gt;<b>b</b>');
  });
  it('escapeHtml covers the characters that end text or attributes', () => {
    expect(escapeHtml(`&<>"'\``)).toBe('&amp;&lt;&gt;&quot;&#39;&#96;');
  });
  it('hrefTo percent-encodes each segment, so an id cannot add a path, a scheme or a query', () => {
    expect(hrefTo(['tasks', '../x?y=1#z'])).toBe('/tasks/..%2Fx%3Fy%3D1%23z');
    expect(hrefTo(['tasks'], { state: 'failed', other: undefined })).toBe('/tasks?state=failed');
    expect(hrefTo(['javascript:alert(1)'])).toBe('/javascript%3Aalert(1)');
  });
});
