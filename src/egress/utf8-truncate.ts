/**
 * Cuts text to a UTF-8 byte budget on a whole code point (docs/behaviour.md#e3: `😀😀😀` with cap 5 → `😀`).
 */
export interface Truncated {
  text: string;
  truncated: boolean;
}

export function truncateUtf8(text: string, maxBytes: number): Truncated {
  // Fast path: no code point takes more than 3 UTF-8 bytes per UTF-16 unit.
  if (text.length * 3 <= maxBytes) return { text, truncated: false };
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return { text, truncated: false };
  let end = Math.max(0, maxBytes);
  // Step back over continuation bytes (10xxxxxx) so the cut lands on a code point boundary.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return { text: bytes.subarray(0, end).toString('utf8'), truncated: true };
}
