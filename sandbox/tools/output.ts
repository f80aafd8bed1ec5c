/**
 * Output helpers shared by the tools: a byte-capped line buffer, binary sniffing, error
 * wrapping that never leaks host paths.
 */
import { PathConfineError } from '../path-confine.js';
import { ToolArgError } from './args.js';
import { GlobSyntaxError } from './glob.js';
import type { ToolResult } from './types.js';

/** Bytes sniffed for a NUL to call a file binary (same heuristic as git and grep). */
export const BINARY_SNIFF_BYTES = 8 * 1024;

export function looksBinary(buf: Uint8Array): boolean {
  const end = Math.min(buf.length, BINARY_SNIFF_BYTES);
  for (let i = 0; i < end; i += 1) if (buf[i] === 0) return true;
  return false;
}

/**
 * Collects output lines up to a UTF-8 byte cap, keeping room for the trailing notes so the
 * final text (lines + notes) stays within the cap.
 */
export class CappedLines {
  private readonly lines: string[] = [];
  private bytes = 0;
  private readonly budget: number;
  truncated = false;

  constructor(readonly maxBytes: number) {
    const reserve = Math.min(1024, Math.floor(maxBytes / 2));
    this.budget = maxBytes - reserve;
  }

  get count(): number {
    return this.lines.length;
  }

  /** Add a line if it fits (newline included); otherwise mark truncated and return false. */
  add(line: string): boolean {
    if (this.truncated) return false;
    const size = Buffer.byteLength(line) + 1;
    if (this.bytes + size > this.budget) {
      this.truncated = true;
      return false;
    }
    this.lines.push(line);
    this.bytes += size;
    return true;
  }

  /** Add as much of `line` as fits (cut at a character boundary) and mark truncated. */
  addCut(line: string): void {
    const room = this.budget - this.bytes - 1;
    if (room > 0) {
      const cut = cutToBytes(line, room);
      if (cut.length > 0) {
        this.lines.push(cut);
        this.bytes += Buffer.byteLength(cut) + 1;
      }
    }
    this.truncated = true;
  }

  finish(notes: readonly string[]): string {
    const text = [...this.lines, ...notes].join('\n');
    return Buffer.byteLength(text) <= this.maxBytes ? text : cutToBytes(text, this.maxBytes);
  }
}

/** Longest prefix of `text` whose UTF-8 encoding fits in `maxBytes`, never splitting a character. */
export function cutToBytes(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  const buf = Buffer.from(text).subarray(0, Math.max(0, maxBytes));
  let end = buf.length;
  // Back off over UTF-8 continuation bytes so the last character is whole.
  let k = end - 1;
  while (k >= 0 && ((buf[k] as number) & 0xc0) === 0x80) k -= 1;
  if (k >= 0) {
    const lead = buf[k] as number;
    const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    if (end - k < need) end = k;
  }
  return buf.subarray(0, end).toString('utf8');
}

/** Cut to at most `maxChars` UTF-16 units (not splitting a surrogate pair), adding `…` when cut. */
export function cutToChars(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  let end = maxChars;
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return `${text.slice(0, end)}…`;
}

/**
 * Turn anything thrown into a tool error. Known errors carry safe messages; anything else is
 * reduced to its errno code, because Node's fs messages embed absolute host paths.
 */
export function toolError(tool: string, err: unknown): ToolResult {
  if (err instanceof ToolArgError) return { ok: false, error: err.message };
  if (err instanceof PathConfineError) return { ok: false, error: `${tool}: ${err.message}` };
  if (err instanceof GlobSyntaxError) return { ok: false, error: `${tool}: invalid glob: ${err.message}` };
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return { ok: false, error: `${tool}: failed${typeof code === 'string' ? ` (${code})` : ''}` };
}

export function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}
