/**
 * What the answer and the result say about the repository snapshot the task ran over
 * (docs/behaviour.md#what-the-task-could-read): files the caller could not read and files the
 * secrets rule left out are named, so an answer that could not see them says so rather than
 * reading as if the repository had none. Paths skipped for other reasons (`.gitignore`, the
 * task's own `repoExclude`, special files, symlinks leaving the tree) are in the result only.
 * Deterministic: counts and the packer's sorted, bounded path lists.
 */
import type { RepoSnapshotReport } from '../tasks/runner-port.js';

/** The result's `repository` member: the snapshot's digest, size (entries, regular files) and every skip count, with the named paths. */
export function snapshotMetadata(report: RepoSnapshotReport | undefined): Record<string, unknown> | undefined {
  if (report === undefined) return undefined;
  return { snapshot_sha256: report.digest, entries: report.entries, ...(report.files === undefined ? {} : { files: report.files }), skipped: report.skipped.counts, skipped_paths: report.skipped.paths };
}

/** The closing section naming files the task could not read (empty when there are none). */
export function skippedNotice(report: RepoSnapshotReport | undefined): string {
  if (report === undefined) return '';
  const { counts, paths } = report.skipped;
  const parts: string[] = [];
  const list = (names: readonly string[], total: number): string[] => [
    ...names.map((p) => `- \`${p}\``),
    ...(total > names.length ? [`- … and ${total - names.length} more`] : []),
  ];
  if (counts.unreadable > 0) {
    parts.push(`${counts.unreadable} ${counts.unreadable === 1 ? 'path was' : 'paths were'} left out because the submitting user cannot read ${counts.unreadable === 1 ? 'it' : 'them'}:`, '', ...list(paths.unreadable, counts.unreadable), '');
  }
  if (counts.secret > 0) {
    parts.push(`${counts.secret} ${counts.secret === 1 ? 'path was' : 'paths were'} left out by the secrets rule (files that commonly hold credentials; a task's \`repoExclude\` replaces the rule):`, '', ...list(paths.secret, counts.secret), '');
  }
  if (parts.length === 0) return '';
  return ['', '', '## Files not read', '', 'This answer was written without these files of the repository; anything in them is not reflected above.', '', ...parts].join('\n').trimEnd();
}
