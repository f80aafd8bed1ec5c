/**
 * The fenced code blocks of the README and docs/*.md, for the docs test: every block with its
 * file, line, language and text, and the reason of a `<!-- not-run: REASON -->` marker on the
 * line just above its fence (the only way to keep a shell or TypeScript block from running).
 *
 * A fence is a line of three or more backticks (indentation allowed, as inside a list item)
 * followed by an optional language word; it ends at a line of at least as many backticks. The
 * block's text loses the fence's indentation, as Markdown renders it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

export interface Snippet {
  /** Path relative to the repository root. */
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The info string's first word, lower-cased ('' for an untagged block). */
  lang: string;
  code: string;
  /** The reason of the not-run marker above the fence, if there is one. */
  notRun?: string;
}

export const SHELL_LANGS: ReadonlySet<string> = new Set(['sh', 'bash', 'shell']);
export const TS_LANGS: ReadonlySet<string> = new Set(['ts', 'typescript']);

const OPEN = /^( *)(`{3,})([^`]*)$/u;
const MARKER = /^\s*<!--\s*not-run:\s*(.*?)\s*-->\s*$/u;

export function parseSnippets(file: string, text: string): Snippet[] {
  const lines = text.split('\n');
  const out: Snippet[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = OPEN.exec(lines[i]!);
    if (open === null) continue;
    const [, indent, fence, info] = open as unknown as [string, string, string, string];
    const close = new RegExp(`^ *\`{${String(fence.length)},}\\s*$`, 'u');
    let end = i + 1;
    while (end < lines.length && !close.test(lines[end]!)) end++;
    if (end >= lines.length) throw new Error(`${file}:${String(i + 1)}: a code fence that never closes`);
    const body = lines.slice(i + 1, end).map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l.trimStart()));
    const marker = i > 0 ? MARKER.exec(lines[i - 1]!) : null;
    out.push({
      file,
      line: i + 1,
      lang: info.trim().split(/\s+/u)[0]!.toLowerCase(),
      code: `${body.join('\n')}\n`,
      ...(marker !== null ? { notRun: marker[1]! } : {}),
    });
    i = end;
  }
  return out;
}

/** README.md and every docs/*.md, in that order. */
export function docFiles(root: string): string[] {
  const docs = readdirSync(join(root, 'docs')).filter((n) => n.endsWith('.md')).sort().map((n) => join(root, 'docs', n));
  return [join(root, 'README.md'), ...docs];
}

export function allSnippets(root: string): Snippet[] {
  return docFiles(root).flatMap((path) => parseSnippets(relative(root, path), readFileSync(path, 'utf8')));
}

/** Markers that are not directly above a fence (a typo'd or orphaned marker would skip nothing). */
export function strayMarkers(file: string, text: string): number[] {
  const lines = text.split('\n');
  const stray: number[] = [];
  lines.forEach((l, i) => {
    if (/not-run/u.test(l) && MARKER.test(l) && !OPEN.test(lines[i + 1] ?? '')) stray.push(i + 1);
  });
  return stray;
}
