/**
 * Newline-delimited messages from a byte stream, each at most `maxBytes` long.
 *
 * Why not node:readline: it buffers a line until its newline arrives, so a client that sends an
 * endless line (or one huge message) makes the MCP server hold it all in memory. Here a line
 * that passes the limit is reported once, the moment it does (so the client hears about it even
 * if no newline ever comes), and its bytes are dropped up to the next newline: memory stays
 * bounded by the limit plus one read chunk, whatever the client sends.
 */
import type { Readable } from 'node:stream';

/** 4 MiB: far above any tool call the server accepts, far below what hurts the process. */
export const MCP_MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

export type LineItem =
  | { kind: 'line'; text: string }
  /** A line passed `maxBytes`: reported once, then discarded through its newline. */
  | { kind: 'oversized'; maxBytes: number };

const NEWLINE = 0x0a;
const CR = 0x0d;

export async function* boundedLines(input: Readable, maxBytes: number = MCP_MAX_MESSAGE_BYTES): AsyncGenerator<LineItem> {
  let parts: Buffer[] = [];
  let held = 0;
  let discarding = false;
  const finish = (tail: Buffer): string => {
    const line = Buffer.concat([...parts, tail]).toString('utf8');
    parts = [];
    held = 0;
    // CRLF clients: the carriage return belongs to the delimiter, not the message.
    return line.endsWith('\r') ? line.slice(0, -1) : line;
  };
  for await (const raw of input) {
    let chunk = typeof raw === 'string' ? Buffer.from(raw, 'utf8') : (raw as Buffer);
    while (chunk.length > 0) {
      const nl = chunk.indexOf(NEWLINE);
      const piece = nl === -1 ? chunk : chunk.subarray(0, nl);
      chunk = nl === -1 ? Buffer.alloc(0) : chunk.subarray(nl + 1);
      if (discarding) {
        if (nl !== -1) discarding = false;
        continue;
      }
      // One byte over the limit is held back for a CR (a CRLF client's message of exactly the
      // limit); the line is measured without it when it ends.
      const length = held + piece.length;
      const lastByte = piece.length > 0 ? piece[piece.length - 1] : parts.at(-1)?.at(-1);
      if (length > maxBytes + 1 || (length === maxBytes + 1 && lastByte !== CR)) {
        parts = [];
        held = 0;
        discarding = nl === -1;
        yield { kind: 'oversized', maxBytes };
        continue;
      }
      if (nl === -1) {
        // Copied: the stream may reuse its buffer for the next chunk.
        parts.push(Buffer.from(piece));
        held += piece.length;
      } else {
        yield { kind: 'line', text: finish(piece) };
      }
    }
  }
  // A last line without its newline is still a message (readline did the same).
  if (!discarding && held > 0) yield { kind: 'line', text: finish(Buffer.alloc(0)) };
}
