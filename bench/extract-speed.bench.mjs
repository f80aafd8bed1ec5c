/**
 * Extraction speed as a ratio to parsing the same page with htmlparser2 (a domhandler tree, the
 * parse every extractor needs at least), in the same run, interleaved so machine load hits all
 * sides alike. The page is ~1 MiB of realistic article HTML: head with scripts and styles, a
 * navigation menu, nested divs with classes, inline markup, entities, lists, tables and code.
 *
 * Goals: HTML → text ≤ 2× the parse, HTML → Markdown ≤ 3×. Also projects a research run of
 * 20 such pages (20 MiB, text mode) on one core against the run's 30 s limit.
 *
 * Run: node bench/run.mjs extract-speed (after a build). BENCH_SHORT=1: fewer rounds.
 */
import process from 'node:process';
import { Buffer } from 'node:buffer';
import { TextDecoder } from 'node:util';
import { performance } from 'node:perf_hooks';
import { parseDocument } from 'htmlparser2';
import { extractContent } from '../dist/src/egress/extract.js';

const PAGE_BYTES = 1024 * 1024;
const OUTPUT_CAP = 512 * 1024;

export function realisticPage(bytes, seed = 0) {
  const head =
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Bench article</title>' +
    '<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="stylesheet" href="/s.css">' +
    `<style>${'.c{color:#333;margin:0 auto}'.repeat(40)}</style>` +
    `<script>${'window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments)}'.repeat(20)}</script></head>` +
    '<body class="page"><header class="site-header"><nav aria-label="main"><ul class="menu">' +
    Array.from({ length: 30 }, (_, i) => `<li class="menu-item"><a href="/section/${i}" class="nav-link">Section&nbsp;${i}</a></li>`).join('') +
    '</ul></nav></header><main id="content"><article class="post">';
  const parts = [head];
  let size = head.length;
  for (let i = seed; size < bytes - 200; i++) {
    const section =
      `<section class="block" id="s${i}"><div class="wrapper"><div class="inner"><h2 class="title">Section ${i}: caf&eacute; &amp; r&eacute;sum&eacute;</h2>` +
      `<p class="lead">Paragraph ${i} with <a href="/link/${i}?ref=nav&amp;x=${i}" title="t">a relative link</a>, <a href="https://example.org/e/${i}">an absolute one</a>, ` +
      '<strong>bold</strong>, <em>emphasis</em>, <code>inline()</code> and <span class="note">a span</span>. Lorem ipsum dolor sit amet, consectetur adipiscing elit, ' +
      'sed do eiusmod tempor incididunt ut labore et dolore magna aliqua &mdash; ut enim ad minim veniam.</p>' +
      '<p>Quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat.<br>Duis aute irure dolor in reprehenderit.</p>' +
      `<ul class="list"><li>item one</li><li>item <b>two</b><ul><li>nested ${i}</li></ul></li><li><a href="#s${i}">anchor</a></li></ul>` +
      `<ol start="2"><li>first</li><li>second</li></ol>` +
      `<table class="data"><thead><tr><th>key</th><th>value</th></tr></thead><tbody><tr><td>${i}</td><td>v|${i}</td></tr><tr><td>x</td><td></td></tr></tbody></table>` +
      `<blockquote><p>Quoted ${i}.</p></blockquote><pre><code class="language-js">const v${i} = ${i};\nif (v${i} &lt; 3) { run(); }</code></pre>` +
      `<img src="/img/${i}.png" alt="figure ${i}"><!-- comment ${i} --><script>track(${i})</script></div></div></section>`;
    parts.push(section);
    size += section.length;
  }
  parts.push('</article></main><footer><p>&copy; footer</p></footer></body></html>');
  return Buffer.from(parts.join(''));
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};
const round = (n) => Math.round(n * 100) / 100;

export default async function run() {
  const short = process.env.BENCH_SHORT === '1';
  const rounds = short ? 4 : 15;
  const warmup = short ? 1 : 3;
  const body = realisticPage(PAGE_BYTES);
  const mib = body.length / (1024 * 1024);
  const input = (extract) => ({ body, mediaType: 'text/html', charset: 'utf-8', extract, baseUrl: 'https://bench.test/dir/page', maxOutputBytes: OUTPUT_CAP, links: extract === 'text' });

  const sides = {
    parse: () => parseDocument(new TextDecoder('utf-8', { fatal: true }).decode(body)),
    text: () => extractContent(input('text')),
    markdown: () => extractContent(input('markdown')),
  };
  const times = { parse: [], text: [], markdown: [] };
  const names = Object.keys(sides);
  for (let i = 0; i < warmup + rounds; i++) {
    // Rotate the order each round so drift favours no side.
    const order = names.map((_, k) => names[(k + i) % names.length]);
    for (const name of order) {
      globalThis.gc?.();
      const started = performance.now();
      sides[name]();
      const elapsed = performance.now() - started;
      if (i >= warmup) times[name].push(elapsed);
    }
  }
  const parseMs = median(times.parse);
  const textMs = median(times.text);
  const markdownMs = median(times.markdown);
  const text = sides.text();
  const markdown = sides.markdown();
  // A research run: 20 pages of this size in text mode, one after the other on one core.
  const projectedRunMs = 20 * textMs;
  return {
    name: 'extract-speed',
    page_bytes: body.length,
    rounds,
    parse_ms_per_mib: round(parseMs / mib),
    text_ms_per_mib: round(textMs / mib),
    markdown_ms_per_mib: round(markdownMs / mib),
    text_ratio: round(textMs / parseMs),
    markdown_ratio: round(markdownMs / parseMs),
    text_target_ratio: 2,
    markdown_target_ratio: 3,
    text_within_target: textMs / parseMs <= 2,
    markdown_within_target: markdownMs / parseMs <= 3,
    text_output_bytes: Buffer.byteLength(text.content),
    markdown_output_bytes: Buffer.byteLength(markdown.content),
    links_found: text.links?.length ?? 0,
    projected_20_pages_20_mib_text_ms: Math.round(projectedRunMs),
    projected_fits_30s: projectedRunMs < 30_000,
  };
}
