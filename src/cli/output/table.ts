/**
 * Plain-text tables for people: a header row, columns padded to their widest cell, one column
 * (the free text) shortened with an ellipsis so a row fits the terminal. Cells are shown with
 * control characters escaped: task text comes from callers and must not move the cursor.
 */

export interface Column {
  header: string;
  /** The column that gives up width when the row is too long (at most one). */
  flexible?: boolean;
  /** Narrowest the flexible column gets. */
  min?: number;
}

/** Control characters as visible escapes, newlines as spaces. */
export function printable(text: string): string {
  let out = '';
  for (const c of text) {
    const code = c.codePointAt(0)!;
    if (c === '\n' || c === '\t' || c === '\r') out += ' ';
    else if (code < 0x20 || (code >= 0x7f && code <= 0x9f) || code === 0x2028 || code === 0x2029) out += `\\u${code.toString(16).padStart(4, '0')}`;
    else out += c;
  }
  return out;
}

/** `text` cut to `width` characters, ending in … when cut. */
export function truncate(text: string, width: number): string {
  const chars = [...text];
  if (chars.length <= width) return text;
  return width <= 1 ? '…'.slice(0, width) : `${chars.slice(0, width - 1).join('')}…`;
}

/** The rows as aligned lines (header first), fitting `width` characters when the flexible column can shrink. */
export function renderTable(columns: readonly Column[], rows: ReadonlyArray<readonly string[]>, width = 120): string {
  const cells = rows.map((r) => r.map((c) => printable(c)));
  const widths = columns.map((col, i) => Math.max(col.header.length, ...cells.map((r) => [...(r[i] ?? '')].length)));
  const flex = columns.findIndex((c) => c.flexible === true);
  if (flex >= 0) {
    const others = widths.reduce((sum, w, i) => (i === flex ? sum : sum + w), 0) + 2 * (columns.length - 1);
    const room = Math.max(columns[flex]!.min ?? 10, columns[flex]!.header.length, width - others);
    widths[flex] = Math.min(widths[flex]!, room);
    for (const r of cells) r[flex] = truncate(r[flex] ?? '', widths[flex]!);
  }
  const line = (r: readonly string[]): string =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c + ' '.repeat(Math.max(0, widths[i]! - [...c].length))))
      .join('  ')
      .trimEnd();
  return `${[line(columns.map((c) => c.header)), ...cells.map(line)].join('\n')}\n`;
}
