/**
 * The dashboard's two static files, served from /static/ with their own digests as ETags. The
 * script is the only one the Content-Security-Policy admits (`script-src 'self'`, no inline
 * script): it refreshes a page whose `<main>` carries `data-live="MS"` by fetching the same URL,
 * parsing it with DOMParser (which never runs scripts) and swapping the new `<main>` in, so a
 * running task's timeline moves without a reload. It stops when the new page is no longer live
 * (the task ended) or the server answers anything but 200.
 */
import { createHash } from 'node:crypto';

const SCRIPT = `'use strict';
(function () {
  var MIN_MS = 1000;
  var busy = false;
  function liveMs() {
    var main = document.querySelector('main[data-live]');
    if (!main) return 0;
    var ms = Number(main.getAttribute('data-live'));
    return Number.isFinite(ms) && ms >= MIN_MS ? ms : 5000;
  }
  function schedule() {
    var ms = liveMs();
    if (ms > 0) setTimeout(refresh, ms);
  }
  function refresh() {
    if (busy) return;
    if (document.hidden) { schedule(); return; }
    busy = true;
    fetch(location.href, { credentials: 'same-origin', cache: 'no-store', headers: { 'x-fusion-dashboard-refresh': '1' } })
      .then(function (res) {
        if (res.status !== 200) throw new Error('status ' + res.status);
        return res.text();
      })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, 'text/html');
        var fresh = doc.querySelector('main');
        var current = document.querySelector('main');
        if (!fresh || !current) return;
        var open = Array.prototype.map.call(current.querySelectorAll('details[open]'), function (d) { return d.id; });
        var next = document.importNode(fresh, true);
        open.forEach(function (id) { if (id) { var d = next.querySelector('#' + CSS.escape(id)); if (d) d.open = true; } });
        current.replaceWith(next);
        document.title = doc.title;
        document.documentElement.setAttribute('data-refreshed', String(Date.now()));
      })
      .then(function () { busy = false; schedule(); }, function () { busy = false; });
  }
  document.addEventListener('DOMContentLoaded', schedule);
})();
`;

const STYLE = `:root { color-scheme: light dark; --fg: #1b1f24; --muted: #59636e; --bg: #ffffff; --line: #d1d9e0; --warn: #9a6700; --bad: #cf222e; --ok: #1a7f37; --run: #0969da; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #9198a1; --bg: #0d1117; --line: #3d444d; --warn: #d29922; --bad: #f85149; --ok: #3fb950; --run: #4493f8; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; justify-content: space-between; align-items: center; padding: .6rem 1.2rem; border-bottom: 1px solid var(--line); }
header nav a { margin-right: 1rem; font-weight: 600; }
.viewer { color: var(--muted); }
main { padding: 0 1.2rem 2rem; max-width: 1400px; }
h1 { font-size: 1.3rem; word-break: break-all; }
h2 { font-size: 1.05rem; margin-top: 1.6rem; border-bottom: 1px solid var(--line); }
a { color: var(--run); }
table { border-collapse: collapse; width: 100%; margin: .4rem 0; }
th, td { text-align: left; vertical-align: top; padding: .3rem .5rem; border-bottom: 1px solid var(--line); }
th { color: var(--muted); font-weight: 600; }
td.objective, .objective { max-width: 48ch; overflow-wrap: anywhere; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dt { color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
dl.by-state { grid-template-columns: repeat(6, max-content 4ch); }
code { font-family: ui-monospace, monospace; font-size: .92em; overflow-wrap: anywhere; }
.state { display: inline-block; padding: 0 .45rem; border-radius: 1rem; border: 1px solid var(--line); font-size: .85em; }
.state-completed, .state-succeeded { color: var(--ok); border-color: var(--ok); }
.state-failed, .state-cancelled { color: var(--bad); border-color: var(--bad); }
.state-running, .state-candidates_running, .state-evaluating, .state-merging, .state-queued, .state-initializing { color: var(--run); border-color: var(--run); }
.error { color: var(--bad); }
.empty { color: var(--muted); }
.caution { color: var(--warn); font-weight: 600; margin-bottom: .2rem; }
pre.untrusted { white-space: pre-wrap; overflow-wrap: anywhere; max-height: 32rem; overflow: auto; padding: .6rem; border: 1px dashed var(--warn); background: color-mix(in srgb, var(--warn) 6%, var(--bg)); }
nav.filters a { margin-right: .5rem; }
nav.filters a.current { font-weight: 700; text-decoration: none; color: var(--fg); }
details.snapshot { margin: .4rem 0; }
`;

export interface StaticAsset {
  contentType: string;
  body: Buffer;
  etag: string;
}

function asset(contentType: string, text: string): StaticAsset {
  const body = Buffer.from(text, 'utf8');
  return { contentType, body, etag: `"${createHash('sha256').update(body).digest('hex').slice(0, 32)}"` };
}

/** The files under /static/, by name. */
export const STATIC_ASSETS: ReadonlyMap<string, StaticAsset> = new Map([
  ['dashboard.js', asset('text/javascript; charset=utf-8', SCRIPT)],
  ['dashboard.css', asset('text/css; charset=utf-8', STYLE)],
]);
