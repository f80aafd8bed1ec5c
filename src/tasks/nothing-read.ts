/**
 * Whether a completed task read none of what it was asked to read (docs/behaviour.md#nothing-read):
 * a research task none of whose declared sources any candidate fetched (DNS, a refused address,
 * robots.txt…), or a task none of whose repository files made it into its snapshot because the
 * submitting user cannot read them or the secrets rule left them out. Such a task completes and its
 * answer verifies, yet it was written from nothing; the result, `fusion wait` and the CLI's exit
 * code say so, so a script cannot take it for a real success.
 *
 * Decided when the result is read, from the committed metadata and canonical input, so results
 * committed before this existed are judged the same way. A snapshot recorded before regular files
 * were counted (`repository.files` absent) is never judged empty.
 */

/** What a completed task could not read at all: its declared sources, or its repository's files. */
export interface NothingRead {
  what: 'sources' | 'files';
  /** The declared sources, or the repository files left out (unreadable or secret). */
  count: number;
}

/** The members of a result's metadata this judgement uses (fusion-workflow.ts writes them). */
export interface NothingReadMetadata {
  sources_not_read?: ReadonlyArray<{ url: string }>;
  repository?: { files?: number; skipped?: { unreadable?: number; secret?: number } };
}

function declaredSources(canonicalInput: string): number {
  try {
    const sources = (JSON.parse(canonicalInput) as { context?: { declared_sources?: unknown } }).context?.declared_sources;
    return Array.isArray(sources) ? sources.length : 0;
  } catch {
    return 0;
  }
}

/** The judgement for a completed task (null: it read something, or there was nothing it failed to read). */
export function nothingReadOf(workflow: string, canonicalInput: string, metadata: NothingReadMetadata): NothingRead | null {
  if (workflow === 'research') {
    const declared = declaredSources(canonicalInput);
    const unread = new Set((metadata.sources_not_read ?? []).map((s) => s.url)).size;
    return declared > 0 && unread >= declared ? { what: 'sources', count: declared } : null;
  }
  const repo = metadata.repository;
  const leftOut = (repo?.skipped?.unreadable ?? 0) + (repo?.skipped?.secret ?? 0);
  return repo?.files === 0 && leftOut > 0 ? { what: 'files', count: leftOut } : null;
}

/** The sentence the result's header and the CLI add, naming the answer's closing section. */
export function nothingReadSentence(n: NothingRead): string {
  return n.what === 'sources'
    ? `Nothing was read: none of its ${String(n.count)} declared ${n.count === 1 ? 'source' : 'sources'} could be fetched, so the answer is written without them (see "Sources not read").`
    : `Nothing was read: none of the repository's files could be read (${String(n.count)} left out), so the answer is written without them (see "Files not read").`;
}
