/**
 * The supervisor's citation checks that read the repository on the host: `path:line` citations
 * against the files (never outside the repository), and the report on the delivered answer.
 * Parsing and the statuses are in src/contracts/citations.ts, shared with the builtin engine.
 *
 * The repository given here is the task's snapshot (the daemon's own root-owned tree, packed as
 * the caller: docs/operations.md#repository-snapshots), never the caller's path: a caller who
 * swaps that path for a link after the task started cannot make these root reads quote another
 * user's files. The "world-readable only" rule stays as a second guard for a tree read in place.
 */
import { constants as fsConstants } from 'node:fs';
import { open, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { isInside, PathConfineError, resolveBelowRealRoot } from '../../sandbox/path-confine.js';
import {
  CITATION_LIMITS,
  checkUrlCitations,
  cutActual,
  extractCitations,
  isConfirmed,
  quoteMatches,
  type Citation,
  type CitationCheck,
  type DeliveredCitations,
  type FetchedPage,
  type UnconfirmedCitation,
} from '../contracts/citations.js';

type FileLines = { ok: true; lines: string[] } | { ok: false; status: 'missing_file' | 'outside_repo' };

/**
 * Resolves and reads a cited file. The path is confined to the repository by the same rule the
 * sandbox's tools use (sandbox/path-confine.ts: lexical check first, then the real path with
 * every symlink resolved); only a regular file under the size cap is then opened (O_NOFOLLOW,
 * O_NONBLOCK so a FIFO cannot hang us).
 */
async function readRepoFile(repoReal: string, relPath: string, worldReadableOnly: boolean): Promise<FileLines> {
  let real: string;
  try {
    real = (await resolveBelowRealRoot(repoReal, repoReal, relPath)).realPath;
  } catch (err) {
    return { ok: false, status: err instanceof PathConfineError && err.reason === 'outside' ? 'outside_repo' : 'missing_file' };
  }
  try {
    const info = await stat(real);
    if (!info.isFile() || info.size > CITATION_LIMITS.maxFileBytes) return { ok: false, status: 'missing_file' };
    // A root daemon must not read, on a candidate's behalf, what the sandbox uid could not.
    if (worldReadableOnly && !(await sandboxCouldRead(repoReal, real, info.mode))) return { ok: false, status: 'missing_file' };
    const handle = await open(real, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
    try {
      const opened = await handle.stat();
      if (!opened.isFile() || opened.size > CITATION_LIMITS.maxFileBytes) return { ok: false, status: 'missing_file' };
      const buf = Buffer.alloc(Math.min(opened.size, CITATION_LIMITS.maxFileBytes) + 1);
      const { bytesRead } = await handle.read(buf, 0, buf.length, 0);
      if (bytesRead > CITATION_LIMITS.maxFileBytes) return { ok: false, status: 'missing_file' };
      const bytes = buf.subarray(0, bytesRead);
      // A NUL byte marks a binary file: there is no line to cite.
      if (bytes.includes(0)) return { ok: false, status: 'missing_file' };
      const content = bytes.toString('utf8');
      const lines = content.split(/\r?\n/);
      if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
      return { ok: true, lines };
    } finally {
      await handle.close();
    }
  } catch {
    return { ok: false, status: 'missing_file' };
  }
}

/** World-readable file under world-traversable directories (the sandbox uid is nobody's group). */
async function sandboxCouldRead(repoReal: string, real: string, fileMode: number): Promise<boolean> {
  if ((fileMode & 0o004) === 0) return false;
  for (let dir = path.dirname(real); isInside(repoReal, dir) && dir !== repoReal; dir = path.dirname(dir)) {
    if (((await stat(dir)).mode & 0o001) === 0) return false;
  }
  return true;
}

function checkOne(citation: Citation, file: FileLines): CitationCheck {
  const base: CitationCheck = { citation: citation.citation, path: citation.path, line: citation.line, status: 'missing_file' };
  if (citation.endLine !== undefined) base.endLine = citation.endLine;
  if (citation.quoted !== undefined) base.quoted = citation.quoted;
  if (!file.ok) return { ...base, status: file.status };
  const end = citation.endLine ?? citation.line;
  if (citation.line < 1 || end < citation.line || end > file.lines.length) return { ...base, status: 'missing_line' };
  const actual = file.lines.slice(citation.line - 1, end).join('\n');
  const withActual = { ...base, actual: cutActual(actual) };
  if (citation.quoted === undefined) return { ...withActual, status: 'unquoted_verified_line' };
  return { ...withActual, status: quoteMatches(citation.quoted, actual) ? 'verified' : 'quote_mismatch' };
}

/** Checks the first 200 citations of `text` against the repository at `repoDir`. */
export async function checkCitations(repoDir: string, text: string, options: { worldReadableOnly?: boolean } = {}): Promise<CitationCheck[]> {
  const repoReal = await realpath(repoDir);
  const citations = extractCitations(text);
  const cache = new Map<string, Promise<FileLines>>();
  const results: CitationCheck[] = [];
  for (const citation of citations) {
    let file = cache.get(citation.path);
    if (file === undefined) {
      file = readRepoFile(repoReal, citation.path, options.worldReadableOnly ?? false);
      cache.set(citation.path, file);
    }
    results.push(checkOne(citation, await file));
  }
  return results;
}

/** Longest quote kept in an `unconfirmed` entry of the result. */
const MAX_REPORTED_QUOTE_CHARS = 300;

/**
 * Checks every citation of the final answer (repository lines against the repository; for
 * research, web quotes against the pages fetched in this task) with the same parser and rules
 * as the candidate checks.
 */
export async function checkDeliveredCitations(
  repoDir: string,
  answer: string,
  fetched: ReadonlyArray<FetchedPage> | null,
  options: { worldReadableOnly?: boolean } = {},
): Promise<DeliveredCitations> {
  const repo = await checkCitations(repoDir, answer, options);
  const web = fetched === null ? [] : checkUrlCitations(answer, fetched);
  const unconfirmed: UnconfirmedCitation[] = [];
  const add = (kind: UnconfirmedCitation['kind'], citation: string, status: UnconfirmedCitation['status'], quoted: string | undefined): void => {
    if (isConfirmed(status)) return;
    const entry: UnconfirmedCitation = { kind, citation, status };
    if (quoted !== undefined) entry.quoted = quoted.length <= MAX_REPORTED_QUOTE_CHARS ? quoted : `${quoted.slice(0, MAX_REPORTED_QUOTE_CHARS - 1)}…`;
    unconfirmed.push(entry);
  };
  for (const c of repo) add('repository', c.citation, c.status, c.quoted);
  for (const u of web) add('web', u.url, u.status, u.quoted);
  const checked = repo.length + web.length;
  return { checked, confirmed: checked - unconfirmed.length, unconfirmed };
}
