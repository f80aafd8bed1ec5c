/**
 * `grep {pattern, path?, glob?, ignore_case?, max_matches?}`: lines `path:line:text`.
 *
 * Skips binary files (NUL in the first 8 KiB), files over maxGrepFileBytes, lines over
 * maxGrepLineChars (bounds regex cost per line), `.git` and `node_modules` unless `path`
 * points inside them, and symlinks that leave the root. Regex matching runs under a
 * watchdog (regex-scan.ts) so a catastrophic pattern ends the call instead of hanging it.
 */
import { stat } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { openRegularFile, specialKind } from './open-regular.js';
import { resolveInRepo, realRootOf } from '../path-confine.js';
import { parseArgs, ToolArgError } from './args.js';
import { compileGlob, MAX_GLOB_CHARS } from './glob.js';
import type { GlobMatcher } from './glob.js';
import { CappedLines, cutToChars, looksBinary, plural, toolError } from './output.js';
import { RegexScanner } from './regex-scan.js';
import { memoFile } from './repo-memo.js';
import type { ScanLines } from './regex-scan.js';
import type { ToolImpl, ToolLimits } from './types.js';
import { ARG_LIMITS, resolveLimits } from './types.js';
import { resolveSymlinkTarget, walk } from './walk.js';
import type { WalkState } from './walk.js';

const SPEC = {
  pattern: { type: 'string', required: true, nonEmpty: true, maxChars: ARG_LIMITS.maxPatternChars },
  path: { type: 'string', nonBlank: true },
  glob: { type: 'string', nonBlank: true, maxChars: MAX_GLOB_CHARS },
  ignore_case: { type: 'boolean' },
  max_matches: { type: 'integer', min: 1, max: ARG_LIMITS.grepMaxMatches },
} as const;

/** A batch is scanned once this many characters or files have been collected. */
const BATCH_MAX_CHARS = 4 * 1024 * 1024;
const BATCH_MAX_FILES = 256;

interface Candidate {
  repoPath: string;
  realPath: string;
}

interface PendingFile {
  repoPath: string;
  lines: string[];
  scan: ScanLines;
}

/** Compile with the `u` flag when the pattern allows it (so `\p{L}` works), else without. */
export function compileGrepPattern(pattern: string, ignoreCase: boolean): RegExp {
  const base = ignoreCase ? 'i' : '';
  try {
    return new RegExp(pattern, `${base}u`);
  } catch {
    try {
      return new RegExp(pattern, base);
    } catch (err) {
      const detail = err instanceof Error ? err.message : String(err);
      throw new ToolArgError(`grep.pattern is not a valid regular expression: ${cutToChars(detail, 300)}`);
    }
  }
}

/** A file as grep sees it: skipped (and why), or its lines (null where a line is too long to scan). */
type GrepFile =
  | { kind: 'special' | 'unreadable' | 'large' | 'binary' }
  | { kind: 'text'; lines: string[]; scan: ScanLines; longLines: number; chars: number };

/** Reads and splits one file; `chars` tells the memo (repo-memo.ts) how much text it holds. */
async function loadGrepFile(realPath: string, limits: ToolLimits): Promise<{ value: GrepFile; chars: number }> {
  const skipped = (kind: 'special' | 'unreadable' | 'large' | 'binary'): { value: GrepFile; chars: number } => ({ value: { kind }, chars: 0 });
  let data: Buffer;
  let fh: FileHandle | undefined;
  try {
    // The walk saw a regular file (or a vetted symlink target) here; never blocks if a FIFO
    // or device was swapped in since.
    const opened = await openRegularFile(realPath);
    if (opened.special !== undefined) return skipped('special');
    fh = opened.fh;
    if (opened.st.size > limits.maxGrepFileBytes) return skipped('large');
    data = await fh.readFile();
  } catch {
    return skipped('unreadable');
  } finally {
    await fh?.close().catch(() => undefined);
  }
  if (data.length > limits.maxGrepFileBytes) return skipped('large');
  if (looksBinary(data)) return skipped('binary');
  const text = data.toString('utf8');
  const lines = text.split('\n');
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  const scan: (string | null)[] = new Array<string | null>(lines.length);
  let longLines = 0;
  for (let i = 0; i < lines.length; i += 1) {
    let line = lines[i] as string;
    if (line.endsWith('\r')) line = line.slice(0, -1);
    lines[i] = line;
    if (line.length > limits.maxGrepLineChars) {
      scan[i] = null;
      longLines += 1;
    } else {
      scan[i] = line;
    }
  }
  return { value: { kind: 'text', lines, scan, longLines, chars: text.length }, chars: text.length };
}

class GrepRun {
  readonly out: CappedLines;
  readonly scanner: RegexScanner;
  matchCount = 0;
  capReached = false;
  timedOutAt: string | null = null;
  skippedBinary = 0;
  /** FIFOs, sockets and devices: never opened for reading. */
  skippedSpecial = 0;
  skippedLarge = 0;
  skippedLongLines = 0;
  unreadable = 0;
  private batch: PendingFile[] = [];
  private batchChars = 0;

  constructor(
    re: RegExp,
    readonly maxMatches: number,
    readonly limits: ToolLimits,
    readonly deadline: number,
  ) {
    this.out = new CappedLines(limits.maxOutputBytes);
    this.scanner = new RegexScanner(re);
  }

  get done(): boolean {
    return this.capReached || this.out.truncated || this.timedOutAt !== null;
  }

  async addFile(file: Candidate): Promise<void> {
    const loaded = await memoFile(`${this.limits.maxGrepFileBytes}:${this.limits.maxGrepLineChars}:${file.realPath}`, () => loadGrepFile(file.realPath, this.limits));
    switch (loaded.kind) {
      case 'special':
        this.skippedSpecial += 1;
        return;
      case 'unreadable':
        this.unreadable += 1;
        return;
      case 'large':
        this.skippedLarge += 1;
        return;
      case 'binary':
        this.skippedBinary += 1;
        return;
      default:
        break;
    }
    this.skippedLongLines += loaded.longLines;
    this.batch.push({ repoPath: file.repoPath, lines: loaded.lines, scan: loaded.scan });
    this.batchChars += loaded.chars;
    if (this.batchChars >= BATCH_MAX_CHARS || this.batch.length >= BATCH_MAX_FILES) this.flush();
  }

  flush(): void {
    const batch = this.batch;
    this.batch = [];
    this.batchChars = 0;
    if (batch.length === 0 || this.done) return;
    const remaining = this.maxMatches - this.matchCount;
    const timeoutMs = Math.max(1, Math.min(this.limits.regexTimeoutMs, this.deadline - Date.now()));
    // Ask for one more than we can show, to know whether the cap cut anything off.
    const result = this.scanner.scan(
      batch.map((f) => f.scan),
      remaining + 1,
      timeoutMs,
    );
    if (result.timedOut) {
      this.timedOutAt = batch[0]?.repoPath ?? '.';
      return;
    }
    for (const [f, i] of result.matches) {
      if (this.matchCount >= this.maxMatches) {
        this.capReached = true;
        return;
      }
      const file = batch[f] as PendingFile;
      const text = cutToChars(file.lines[i] as string, this.limits.maxGrepLineOutputChars);
      if (!this.out.add(`${file.repoPath}:${i + 1}:${text}`)) return;
      this.matchCount += 1;
    }
  }

  notes(walkState: WalkState): string[] {
    const notes: string[] = [];
    if (this.matchCount === 0 && this.timedOutAt === null) notes.push('[no matches]');
    if (this.capReached) {
      notes.push(`[match limit reached: showing the first ${this.matchCount} matches; narrow pattern, path or glob, or raise max_matches]`);
    }
    if (this.out.truncated) {
      notes.push(`[truncated: output reached the ${this.limits.maxOutputBytes}-byte cap after ${plural(this.matchCount, 'match', 'matches')}]`);
    }
    if (this.timedOutAt !== null) {
      notes.push(`[search stopped: the pattern ran longer than ${this.limits.regexTimeoutMs} ms on files starting at ${this.timedOutAt}; it may backtrack catastrophically, simplify it]`);
    }
    if (walkState.stopped === 'time') notes.push(`[search stopped early: time budget of ${this.limits.timeBudgetMs} ms used up]`);
    if (walkState.stopped === 'entries') notes.push(`[search stopped early: visited ${walkState.visited} directory entries]`);
    const skipped: string[] = [];
    if (this.skippedBinary > 0) skipped.push(plural(this.skippedBinary, 'binary file', 'binary files'));
    if (this.skippedSpecial > 0) skipped.push(plural(this.skippedSpecial, 'special file (FIFO, socket or device)', 'special files (FIFOs, sockets or devices)'));
    if (this.skippedLarge > 0) {
      skipped.push(`${plural(this.skippedLarge, 'file', 'files')} larger than ${this.limits.maxGrepFileBytes} bytes`);
    }
    if (this.skippedLongLines > 0) {
      skipped.push(`${plural(this.skippedLongLines, 'line', 'lines')} longer than ${this.limits.maxGrepLineChars} characters`);
    }
    if (this.unreadable + walkState.unreadableDirs > 0) {
      skipped.push(plural(this.unreadable + walkState.unreadableDirs, 'unreadable entry', 'unreadable entries'));
    }
    if (skipped.length > 0) notes.push(`[skipped: ${skipped.join(', ')}]`);
    return notes;
  }
}

export const grepTool: ToolImpl = async (root, args, limitsIn) => {
  try {
    const limits = resolveLimits(limitsIn);
    const parsed = parseArgs('grep', SPEC, args);
    const re = compileGrepPattern(parsed.pattern, parsed.ignore_case === true);
    let glob: GlobMatcher | undefined;
    if (parsed.glob !== undefined) glob = compileGlob(parsed.glob, { matchBase: true });
    const target = await resolveInRepo(root, parsed.path ?? '.');
    const realRoot = await realRootOf(root);
    const deadline = Date.now() + limits.timeBudgetMs;
    const run = new GrepRun(re, parsed.max_matches ?? ARG_LIMITS.grepDefaultMatches, limits, deadline);
    const walkState: WalkState = { visited: 0, stopped: null, unreadableDirs: 0 };

    const st = await stat(target.realPath);
    if (st.isFile()) {
      // An explicitly named file is searched whatever the glob says.
      await run.addFile({ repoPath: target.displayPath, realPath: target.realPath });
    } else if (st.isDirectory()) {
      const entries = walk(
        { startReal: target.realPath, startDisplay: target.displayPath, maxEntries: limits.maxWalkEntries, deadline },
        walkState,
      );
      for await (const entry of entries) {
        if (entry.kind === 'other') run.skippedSpecial += 1;
        if (entry.kind !== 'file' && entry.kind !== 'symlink') continue;
        if (glob !== undefined && !glob(entry.basePath) && !glob(entry.repoPath)) continue;
        let realPath = entry.absPath;
        if (entry.kind === 'symlink') {
          // Symlinked files are searched only when their target stays inside the root.
          const resolved = await resolveSymlinkTarget(realRoot, entry.absPath);
          if (resolved === null || resolved.kind !== 'file') continue;
          realPath = resolved.realPath;
        }
        await run.addFile({ repoPath: entry.repoPath, realPath });
        if (run.done) break;
        if (Date.now() > deadline) {
          walkState.stopped = 'time';
          break;
        }
      }
    } else {
      return { ok: false, error: `grep: ${target.displayPath} is not a regular file or directory (${specialKind(st) ?? 'special file'}); skipped` };
    }
    run.flush();
    const text = run.out.finish(run.notes(walkState));
    return run.timedOutAt !== null || walkState.stopped === 'time' ? { ok: true, text, timerCut: true } : { ok: true, text };
  } catch (err) {
    return toolError('grep', err);
  }
};
