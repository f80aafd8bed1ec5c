/**
 * `read {path, offset?, limit?}`: numbered lines of one text file, `<lineNo>\t<text>`.
 *
 * Streams the file so a large file costs only what is shown (plus a newline count for the
 * "of N" note when the file is at most TOTAL_COUNT_MAX_BYTES). Refuses directories and binary
 * files (NUL byte in the first 8 KiB). The output is capped in bytes with an explicit note.
 */
import type { FileHandle } from 'node:fs/promises';
import { resolveInRepo } from '../path-confine.js';
import { openRegularFile } from './open-regular.js';
import { parseArgs } from './args.js';
import { BINARY_SNIFF_BYTES, CappedLines, looksBinary, toolError } from './output.js';
import type { ToolImpl } from './types.js';
import { ARG_LIMITS, resolveLimits } from './types.js';

const CHUNK_BYTES = 64 * 1024;
/** Above this size the total line count is not computed (it would cost a full scan). */
const TOTAL_COUNT_MAX_BYTES = 64 * 1024 * 1024;

const SPEC = {
  path: { type: 'string', required: true, nonBlank: true },
  offset: { type: 'integer', min: 1, max: Number.MAX_SAFE_INTEGER },
  limit: { type: 'integer', min: 1, max: ARG_LIMITS.readMaxLines },
} as const;

interface RawLine {
  bytes: Buffer;
  /** The line was longer than the per-line memory cap and lost its tail. */
  cut: boolean;
}

/** Split a file into lines on `\n` without holding more than `maxLineBytes` of one line. */
async function* readLines(fh: FileHandle, maxLineBytes: number): AsyncGenerator<RawLine> {
  const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
  let parts: Buffer[] = [];
  let partBytes = 0;
  let cut = false;
  let position = 0;
  const take = (piece: Buffer): void => {
    const room = maxLineBytes - partBytes;
    if (piece.length > room) {
      cut = true;
      if (room > 0) {
        parts.push(Buffer.from(piece.subarray(0, room)));
        partBytes += room;
      }
    } else if (piece.length > 0) {
      parts.push(Buffer.from(piece));
      partBytes += piece.length;
    }
  };
  for (;;) {
    const { bytesRead } = await fh.read(chunk, 0, CHUNK_BYTES, position);
    if (bytesRead === 0) break;
    position += bytesRead;
    const data = chunk.subarray(0, bytesRead);
    let start = 0;
    for (;;) {
      const nl = data.indexOf(0x0a, start);
      if (nl === -1) break;
      take(data.subarray(start, nl));
      yield { bytes: Buffer.concat(parts, partBytes), cut };
      parts = [];
      partBytes = 0;
      cut = false;
      start = nl + 1;
    }
    take(data.subarray(start));
  }
  if (partBytes > 0 || cut) yield { bytes: Buffer.concat(parts, partBytes), cut };
}

function decodeLine(raw: RawLine): string {
  let text = raw.bytes.toString('utf8');
  if (text.endsWith('\r')) text = text.slice(0, -1);
  return text;
}

export const readTool: ToolImpl = async (root, args, limitsIn) => {
  let fh: FileHandle | undefined;
  try {
    const limits = resolveLimits(limitsIn);
    const parsed = parseArgs('read', SPEC, args);
    const offset = parsed.offset ?? 1;
    const limit = parsed.limit ?? ARG_LIMITS.readDefaultLines;
    const target = await resolveInRepo(root, parsed.path);
    const shown = target.displayPath;

    // Never blocks (a FIFO, a device): the type is checked before and after a non-blocking
    // O_NOFOLLOW open (realPath has no symlinks left; one swapped in since is refused).
    const opened = await openRegularFile(target.realPath);
    if (opened.special === 'directory') return { ok: false, error: `read: ${shown} is a directory; use ls to list it` };
    if (opened.special !== undefined) return { ok: false, error: `read: ${shown} is not a regular file (${opened.special}); skipped` };
    fh = opened.fh;
    const st = opened.st;

    const sniff = Buffer.alloc(BINARY_SNIFF_BYTES);
    const { bytesRead } = await fh.read(sniff, 0, BINARY_SNIFF_BYTES, 0);
    if (looksBinary(sniff.subarray(0, bytesRead))) {
      return { ok: false, error: `read: ${shown} appears to be a binary file (NUL byte in the first 8 KiB)` };
    }

    const out = new CappedLines(limits.maxOutputBytes);
    const countTotal = st.size <= TOTAL_COUNT_MAX_BYTES;
    let lineNo = 0;
    let lastShown = 0;
    let moreAfter = false;
    let cutLongLine = false;
    let outOfTime = false;
    const deadline = Date.now() + limits.timeBudgetMs;
    for await (const raw of readLines(fh, limits.maxOutputBytes + 4)) {
      lineNo += 1;
      if (lineNo % 4096 === 0 && Date.now() > deadline) {
        outOfTime = true;
        break;
      }
      if (lineNo < offset) continue;
      if (lastShown - offset + 1 >= limit || out.truncated) {
        moreAfter = true;
        if (!countTotal) break;
        continue;
      }
      const line = `${lineNo}\t${decodeLine(raw)}`;
      if (out.add(line)) {
        lastShown = lineNo;
      } else if (out.count === 0) {
        // A single line longer than the whole cap: show its head rather than nothing.
        out.addCut(line);
        lastShown = lineNo;
        cutLongLine = true;
      }
    }

    const total = countTotal && !outOfTime ? lineNo : undefined;
    if (outOfTime && lastShown === 0) {
      return { ok: false, error: `read: time budget of ${limits.timeBudgetMs} ms used up before line ${offset} of ${shown}` };
    }
    const notes: string[] = [];
    if (outOfTime) moreAfter = true;
    if (lineNo === 0 && !moreAfter) {
      notes.push('[empty file]');
    } else if (lastShown === 0 && !out.truncated) {
      notes.push(`[offset ${offset} is past the end of the file (${lineNo} lines)]`);
    } else if (out.truncated) {
      const what = cutLongLine
        ? `line ${lastShown} is longer than the ${limits.maxOutputBytes}-byte output cap and was cut`
        : `output reached the ${limits.maxOutputBytes}-byte cap after line ${lastShown}`;
      const next = moreAfter || lastShown < lineNo ? `; continue with offset=${lastShown + 1}` : '';
      notes.push(`[truncated: ${what}${next}]`);
    } else if (moreAfter) {
      const of = total !== undefined ? ` of ${total}` : '';
      notes.push(`[showing lines ${offset}-${lastShown}${of}; continue with offset=${lastShown + 1}]`);
    }
    return { ok: true, text: out.finish(notes) };
  } catch (err) {
    if ((err as NodeJS.ErrnoException | null)?.code === 'ELOOP') {
      return { ok: false, error: 'read: path changed to a symbolic link while reading' };
    }
    return toolError('read', err);
  } finally {
    await fh?.close().catch(() => undefined);
  }
};
