/**
 * Research runs and their snapshots as the text an agent reads in a tool result or a
 * notification (the structured reply carries the same facts as data).
 */
import { UNTRUSTED_CAUTION } from '../contracts/research-limits.js';
import { RESEARCH_RUN_STATUSES } from '../contracts/research.js';
import type { ResearchRunView } from '../client/types.js';
import { codeSpan, fenced, urlLink } from '../research/crawl/research-document.js';

/** The statuses a run does not leave. */
export const TERMINAL_RUN: ReadonlySet<string> = new Set(RESEARCH_RUN_STATUSES.filter((s) => s !== 'queued' && s !== 'running'));

/** A run's status as words ("is succeeded" reads wrong). */
const RUN_STATUS_WORDS: Readonly<Record<string, string>> = { queued: 'is queued', running: 'is running', succeeded: 'has succeeded', failed: 'has failed', canceled: 'was canceled' };

export function runLine(run: ResearchRunView): string {
  const err = run.error ? ` — ${run.error}` : '';
  const doc = run.resultDocumentId ? ` Document ${run.resultDocumentId}.` : '';
  return `Research run ${run.id} ${RUN_STATUS_WORDS[run.status] ?? `is ${run.status}`}${err}.${doc}`;
}

/** Snapshots as Markdown: the caution, one line of provenance each, and the text (fenced) when asked for. */
export function snapshotsMarkdown(runId: string, snapshots: ReadonlyArray<{ canonicalUrl: string; httpStatus: number | null; contentType: string | null; bytes: number | null; sha256: string | null; content?: string | null }>, withContent: boolean): string {
  const parts = [UNTRUSTED_CAUTION, `# Snapshots of research run ${codeSpan(runId)} (${String(snapshots.length)})`];
  if (snapshots.length === 0) parts.push('_The run stored no page._');
  for (const s of snapshots) {
    parts.push(`- ${urlLink(s.canonicalUrl)}: HTTP ${String(s.httpStatus ?? 'none')}, ${codeSpan(s.contentType ?? 'unknown type')}, ${String(s.bytes ?? 'unknown')} bytes, sha256 ${codeSpan(s.sha256 ?? 'none')}`);
    if (withContent) parts.push(s.content === null || s.content === undefined ? '_No text was kept for this page._' : fenced(s.content.startsWith(`${UNTRUSTED_CAUTION}\n\n`) ? s.content.slice(UNTRUSTED_CAUTION.length + 2) : s.content));
  }
  return `${parts.join('\n\n')}\n`;
}
