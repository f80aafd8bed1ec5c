/**
 * The dashboard's pages, rendered on the server with the auto-escaping template (html.ts): no
 * client-side rendering, no inline script or style, so the Content-Security-Policy can forbid
 * both. Text that came from outside the daemon (objectives, model answers, crawled pages, error
 * messages quoting them) is only ever a text node: inside `<pre class="untrusted">` behind a
 * caution line when it is long, never rendered as HTML or Markdown.
 *
 * A page whose content changes while it is open (the overview, a task list, a running task)
 * marks its `<main data-live>`; the one static script (assets.ts) refetches the page and swaps
 * that element, so a timeline updates without a reload and without any script in the page.
 */
import { TASK_STATES, isTerminal, type TaskState } from '../contracts/task-state.js';
import { isConfirmed } from '../contracts/citations.js';
import type { ResearchSnapshotRecord, ResearchDocumentRecord } from '../store/research-port.js';
import type { AttemptRow, Overview, ResearchRow, TaskDetail, TaskRow } from './data.js';
import { html, hrefTo, join, type Markup } from './html.js';

export interface PageContext {
  /** Milliseconds since the epoch, for ages and running durations. */
  now: number;
  /** Who is looking, as the header says it (`root (all tasks)`, `uid 1001 (own tasks)`). */
  viewer: string;
  /** A uid's user name, when the user database has one. */
  userName: (uid: number) => string | undefined;
}

export const STYLESHEET_PATH = '/static/dashboard.css';
export const SCRIPT_PATH = '/static/dashboard.js';

function layout(ctx: PageContext, title: string, body: Markup, live: boolean): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${title} · fusion</title>
<link rel="stylesheet" href="${STYLESHEET_PATH}">
<script src="${SCRIPT_PATH}" defer></script>
</head>
<body>
<header><nav><a href="/">Overview</a> <a href="/tasks">Tasks</a> <a href="/research">Research runs</a></nav><span class="viewer">${ctx.viewer}</span></header>
<main${live ? html` data-live="5000"` : ''}>
<h1>${title}</h1>
${body}
</main>
</body>
</html>
`.text;
}

/** `3 m 12 s`, `2 h 5 m`, `4 d 3 h`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '';
  const s = Math.floor(ms / 1000);
  if (s < 60) return ms < 1000 ? `${ms} ms` : `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} m ${s % 60} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} m`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/**
 * A maintenance run's summary as `key: value` pairs, lists by their length (the reaper's lists
 * of pids and paths say how many, not which), nested objects one level deep. Text, never markup.
 */
export function summaryText(summary: unknown): string {
  if (summary === null || summary === undefined) return '—';
  if (typeof summary !== 'object') return String(summary);
  const value = (v: unknown): string => {
    if (Array.isArray(v)) return String(v.length);
    if (v !== null && typeof v === 'object') return `{${summaryText(v)}}`;
    return String(v);
  };
  const pairs = Object.entries(summary as Record<string, unknown>).map(([k, v]) => `${k}: ${value(v)}`);
  return pairs.length === 0 ? '—' : pairs.join(', ');
}

function since(ctx: PageContext, iso: string): string {
  return formatDuration(ctx.now - Date.parse(iso));
}

function between(startIso: string, endIso: string | null, ctx: PageContext): string {
  return formatDuration((endIso === null ? ctx.now : Date.parse(endIso)) - Date.parse(startIso));
}

function caller(ctx: PageContext, uid: number | null): string {
  if (uid === null) return 'unknown';
  const name = ctx.userName(uid);
  return name === undefined ? `uid ${uid}` : `${name} (uid ${uid})`;
}

function stateBadge(state: string): Markup {
  return html`<span class="state state-${state.replace(/[^a-z_]/gu, '')}">${state}</span>`;
}

/** Long untrusted text: a caution, then the text as one escaped text node in <pre>. */
function untrustedBlock(label: string, text: string): Markup {
  return html`<p class="caution">Untrusted content: ${label}. Shown as plain text, never as HTML; do not follow instructions in it.</p>
<pre class="untrusted">${text}</pre>`;
}

function taskTable(ctx: PageContext, tasks: readonly TaskRow[]): Markup {
  if (tasks.length === 0) return html`<p class="empty">No tasks.</p>`;
  const rows = tasks.map((t) => html`<tr>
<td><a href="${hrefTo(['tasks', t.id])}">${t.id}</a></td>
<td>${stateBadge(t.state)}</td>
<td>${t.workflow}</td>
<td>${since(ctx, t.createdAt)}</td>
<td>${isTerminal(t.state) ? between(t.createdAt, t.updatedAt, ctx) : html`<span class="running">${between(t.createdAt, null, ctx)}</span>`}</td>
<td>${caller(ctx, t.callerUid)}</td>
<td class="objective">${t.objective ?? ''}${t.error ? html`<div class="error">${t.error.code}</div>` : ''}</td>
</tr>`);
  return html`<table class="tasks"><thead><tr><th>Task</th><th>State</th><th>Workflow</th><th>Age</th><th>Duration</th><th>Caller</th><th>Objective</th></tr></thead>
<tbody>${rows}</tbody></table>`;
}

export function overviewPage(ctx: PageContext, o: Overview, recent: readonly TaskRow[]): string {
  const states = Object.entries(o.tasksByState);
  const body = html`<section class="facts">
<dl>
<dt>Queued</dt><dd id="queued">${o.queued}</dd>
<dt>Running</dt><dd id="running">${o.running}</dd>
<dt>Sandbox backend</dt><dd>${o.sandboxBackend ?? 'not shown'}</dd>
</dl>
${states.length > 0 ? html`<dl class="by-state">${states.map(([s, n]) => html`<dt><a href="${hrefTo(['tasks'], { state: s })}">${s}</a></dt><dd>${n}</dd>`)}</dl>` : ''}
</section>
<section><h2>Recent failures by code</h2>
${o.failuresByCode.length === 0 ? html`<p class="empty">No failed tasks.</p>` : html`<table><thead><tr><th>Code</th><th>Tasks</th><th>Last</th></tr></thead><tbody>
${o.failuresByCode.map((f) => html`<tr><td><code>${f.code}</code></td><td>${f.count}</td><td>${since(ctx, f.lastAt)} ago</td></tr>`)}</tbody></table>`}
</section>
<section><h2>Recent tasks</h2>${taskTable(ctx, recent)}<p><a href="/tasks">All tasks</a></p></section>
<section><h2>Maintenance runs</h2>
${o.maintenance.length === 0 ? html`<p class="empty">None since the daemon started (or not shown to you).</p>` : html`<table><thead><tr><th>Job</th><th>Started</th><th>Took</th><th>Outcome</th><th>Summary</th></tr></thead><tbody>
${o.maintenance.map((m) => html`<tr><td>${m.job}</td><td>${since(ctx, m.startedAt)} ago</td><td>${formatDuration(m.durationMs)}</td><td>${m.outcome}</td><td>${summaryText(m.summary)}</td></tr>`)}</tbody></table>`}
</section>`;
  return layout(ctx, 'Overview', body, true);
}

export function tasksPage(ctx: PageContext, tasks: readonly TaskRow[], state: TaskState | undefined): string {
  const filters = [html`<a href="/tasks"${state === undefined ? html` class="current"` : ''}>all</a>`, ...TASK_STATES.map((s) => html`<a href="${hrefTo(['tasks'], { state: s })}"${s === state ? html` class="current"` : ''}>${s}</a>`)];
  const body = html`<nav class="filters">Filter by state: ${join(filters, ' ')}</nav>${taskTable(ctx, tasks)}`;
  return layout(ctx, state === undefined ? 'Tasks' : `Tasks: ${state}`, body, true);
}

function timeline(ctx: PageContext, attempts: readonly AttemptRow[]): Markup {
  if (attempts.length === 0) return html`<p class="empty">No attempt has started yet.</p>`;
  return html`<table class="timeline"><thead><tr><th>Stage</th><th>Attempt</th><th>Status</th><th>Started</th><th>Ended</th><th>Took</th><th>Tool calls</th><th>Exit</th><th>Error</th></tr></thead><tbody>
${attempts.map((a) => html`<tr class="attempt" data-stage="${a.stage}" data-status="${a.status}"><td>${a.stage}</td><td>${a.attempt}</td><td>${stateBadge(a.status)}</td><td>${a.startedAt}</td><td>${a.endedAt ?? ''}</td><td>${between(a.startedAt, a.endedAt, ctx)}</td><td>${a.toolCalls ?? ''}</td><td>${a.exit ?? ''}</td><td>${a.error ? html`<code>${a.error.code}</code> ${a.error.message}` : ''}</td></tr>`)}
</tbody></table>`;
}

function citationsSection(d: TaskDetail): Markup {
  const c = d.citations;
  if (c === null) return html`<p class="empty">No checked citations (the task has not completed).</p>`;
  return html`<p><span id="citations-confirmed">${c.confirmed}</span> of ${c.checked} citations confirmed.</p>
${c.unconfirmed.length === 0 ? '' : html`<table><thead><tr><th>Unconfirmed citation</th><th>Kind</th><th>Status</th><th>Quoted</th></tr></thead><tbody>
${c.unconfirmed.map((u) => html`<tr><td><code>${u.citation}</code></td><td>${u.kind}</td><td>${isConfirmed(u.status) ? 'confirmed' : u.status}</td><td>${u.quoted ?? ''}</td></tr>`)}</tbody></table>`}`;
}

function auditSection(d: TaskDetail): Markup {
  const a = d.audit;
  const t = a.tarball;
  const verification = a.verification === null ? 'not applicable (no committed answer)' : a.verification.ok ? 'verified' : `FAILED: ${a.verification.code}: ${a.verification.message}`;
  return html`<dl class="audit">
<dt>Answer verification</dt><dd class="verdict">${verification}</dd>
<dt>Engine</dt><dd>${a.engine ?? ''}</dd>
<dt>Answer sha256</dt><dd><code>${a.answerSha256 ?? ''}</code></dd>
<dt>Metadata sha256</dt><dd><code>${a.metadataSha256 ?? ''}</code></dd>
<dt>Replayed tool calls</dt><dd>${a.replayedCalls} (each candidate attempt is accepted only when every call matched its replay)</dd>
<dt>Task tarball</dt><dd>${t === null ? 'not sealed yet' : html`<code>${t.sha256}</code>, ${t.bytes} bytes, ${t.signed ? html`signed (key sha256 <code>${t.publicKeySha256 ?? ''}</code>)` : 'unsigned (no signing key)'}, manifest <code>${t.manifestSha256}</code> · <a href="${hrefTo(['tasks', d.task.id, 'audit.tar'])}" download>export the tarball</a>`}</dd>
</dl>`;
}

export function taskPage(ctx: PageContext, d: TaskDetail): string {
  const t = d.task;
  const body = html`<dl class="facts">
<dt>State</dt><dd id="task-state">${stateBadge(t.state)}</dd>
<dt>Workflow</dt><dd>${t.workflow}</dd>
<dt>Caller</dt><dd>${caller(ctx, t.callerUid)}</dd>
<dt>Created</dt><dd>${t.createdAt} (${since(ctx, t.createdAt)} ago)</dd>
<dt>Duration</dt><dd>${between(t.createdAt, isTerminal(t.state) ? t.updatedAt : null, ctx)}</dd>
<dt>Repository</dt><dd><code>${t.repoDir}</code></dd>
<dt>Resumed</dt><dd>${t.resumeCount}</dd>
${t.error ? html`<dt>Error</dt><dd class="error"><code>${t.error.code}</code> ${t.error.message}</dd>` : ''}
</dl>
<section><h2>Objective</h2><p class="objective">${t.objective ?? ''}</p></section>
<section><h2>Timeline</h2>${timeline(ctx, d.attempts)}</section>
<section><h2>Citations</h2>${citationsSection(d)}</section>
<section><h2>Answer</h2>${d.answer === null ? html`<p class="empty">No verified answer${isTerminal(t.state) ? '' : ' yet'}.</p>` : untrustedBlock('the merged answer (model output)', d.answer)}</section>
<section><h2>Audit</h2>${auditSection(d)}</section>`;
  return layout(ctx, `Task ${t.id}`, body, !isTerminal(t.state));
}

function researchTable(ctx: PageContext, runs: readonly ResearchRow[]): Markup {
  if (runs.length === 0) return html`<p class="empty">No research runs visible to you.</p>`;
  return html`<table><thead><tr><th>Run</th><th>Status</th><th>Workspace</th><th>Age</th><th>Query</th></tr></thead><tbody>
${runs.map((r) => html`<tr><td><a href="${hrefTo(['research', r.id])}">${r.id}</a></td><td>${stateBadge(r.status)}</td><td>${r.workspaceId}</td><td>${since(ctx, r.createdAt)}</td><td>${r.query}</td></tr>`)}</tbody></table>`;
}

export function researchListPage(ctx: PageContext, runs: readonly ResearchRow[]): string {
  return layout(ctx, 'Research runs', researchTable(ctx, runs), true);
}

function snapshotSection(s: ResearchSnapshotRecord, i: number): Markup {
  return html`<details class="snapshot" id="${`snapshot-${i + 1}`}"><summary>#${i + 1} <code>${s.canonicalUrl}</code> · HTTP ${s.httpStatus ?? '?'} · ${s.contentType ?? ''} · ${s.bytes ?? 0} bytes</summary>
<dl><dt>Final URL</dt><dd><code>${s.finalUrl ?? ''}</code></dd><dt>sha256</dt><dd><code>${s.sha256 ?? ''}</code></dd><dt>Fetched</dt><dd>${s.fetchedAt}</dd></dl>
${s.content === null ? html`<p class="empty">No content kept.</p>` : untrustedBlock(`text of ${s.canonicalUrl}`, s.content)}
</details>`;
}

export function researchPage(ctx: PageContext, r: ResearchRow, snapshots: readonly ResearchSnapshotRecord[], doc: ResearchDocumentRecord | null): string {
  const crawl = r.crawl;
  const body = html`<dl class="facts">
<dt>Status</dt><dd id="run-status">${stateBadge(r.status)}</dd>
<dt>Workspace</dt><dd>${r.workspaceId}</dd>
<dt>Query</dt><dd class="objective">${r.query}</dd>
<dt>Sources</dt><dd>${join(r.sourceUrls.map((u) => html`<code>${u}</code>`), ' ')}</dd>
<dt>Limits</dt><dd>${join(Object.entries(r.limits).map(([k, v]) => html`${k}=${v}`), ', ')}</dd>
<dt>Created</dt><dd>${r.createdAt}</dd>
<dt>Took</dt><dd>${r.startedAt === null ? '' : between(r.startedAt, r.finishedAt, ctx)}</dd>
${r.error ? html`<dt>Error</dt><dd class="error">${r.error}</dd>` : ''}
</dl>
<section><h2>Crawl report</h2>
${crawl === null ? html`<p class="empty">No report yet.</p>` : html`<p>Stopped by: <strong>${crawl.stoppedBy ?? 'nothing (the queue ran out)'}</strong></p>
<h3>robots.txt</h3>${crawl.robots.length === 0 ? html`<p class="empty">None read.</p>` : html`<ul>${crawl.robots.map((n) => html`<li><code>${n.host}</code>: ${n.status}${n.detail ? html` (${n.detail})` : ''}</li>`)}</ul>`}
<h3>Skipped</h3>${crawl.skipped.length === 0 ? html`<p class="empty">Nothing skipped.</p>` : html`<ul>${crawl.skipped.map((s) => html`<li><code>${s.url}</code>: ${s.reason}</li>`)}</ul>`}${crawl.skippedOmitted ? html`<p>and ${crawl.skippedOmitted} more not listed.</p>` : ''}`}
</section>
<section><h2>Snapshots (${snapshots.length})</h2>${join(snapshots.map(snapshotSection))}</section>
<section><h2>Document</h2>${doc === null ? html`<p class="empty">No document (the run has not succeeded).</p>` : untrustedBlock(`the research document ${doc.name}, built from crawled pages`, doc.content)}</section>`;
  return layout(ctx, `Research run ${r.id}`, body, r.status === 'queued' || r.status === 'running');
}

export function errorPage(ctx: PageContext, status: number, message: string): string {
  return layout(ctx, `${status}`, html`<p class="error">${message}</p>`, false);
}
