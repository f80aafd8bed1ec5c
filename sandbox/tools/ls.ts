/**
 * `ls {path?}`: the entries of one directory, sorted, one per line: directories suffixed `/`,
 * symlinks suffixed `@` (never followed, whatever they point at), everything else plain.
 * Hidden entries, `.git` and `node_modules` included: this lists names, it does not descend.
 */
import type { Dirent } from 'node:fs';
import { opendir, stat } from 'node:fs/promises';
import { resolveInRepo } from '../path-confine.js';
import { parseArgs } from './args.js';
import { CappedLines, plural, toolError } from './output.js';
import type { ToolImpl } from './types.js';
import { resolveLimits } from './types.js';

const SPEC = {
  path: { type: 'string', nonBlank: true },
} as const;

/** Names read beyond the shown cap, only to report a total; bounds memory on huge dirs. */
const MAX_COUNTED_ENTRIES = 1_000_000;

function format(d: Dirent): string {
  if (d.isSymbolicLink()) return `${d.name}@`;
  if (d.isDirectory()) return `${d.name}/`;
  // Listed, never opened: the mark tells the model `read` will skip it (ls -F's marks).
  if (d.isFIFO()) return `${d.name}|`;
  if (d.isSocket()) return `${d.name}=`;
  if (d.isCharacterDevice() || d.isBlockDevice()) return `${d.name}%`;
  return d.name;
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export const lsTool: ToolImpl = async (root, args, limitsIn) => {
  try {
    const limits = resolveLimits(limitsIn);
    const parsed = parseArgs('ls', SPEC, args);
    const target = await resolveInRepo(root, parsed.path ?? '.');
    const st = await stat(target.realPath);
    if (!st.isDirectory()) return { ok: false, error: `ls: ${target.displayPath} is not a directory; use read to view a file` };

    const entries: { name: string; line: string }[] = [];
    let total = 0;
    const dir = await opendir(target.realPath);
    for await (const d of dir) {
      total += 1;
      entries.push({ name: d.name, line: format(d) });
      if (total >= MAX_COUNTED_ENTRIES) break;
    }
    // Sort by the bare name (code-unit order), so `a/` and `a@` sort where `a` would.
    entries.sort((a, b) => compareStrings(a.name, b.name));
    const names = entries.map((e) => e.line);

    const out = new CappedLines(limits.maxOutputBytes);
    const shownMax = Math.min(names.length, limits.maxLsEntries);
    for (let i = 0; i < shownMax; i += 1) if (!out.add(names[i] as string)) break;
    const notes: string[] = [];
    if (total === 0) notes.push('[empty directory]');
    if (out.truncated) {
      notes.push(`[truncated: output reached the ${limits.maxOutputBytes}-byte cap after ${plural(out.count, 'entry', 'entries')} of ${total}]`);
    } else if (total > shownMax) {
      const of = total >= MAX_COUNTED_ENTRIES ? `at least ${total}` : `${total}`;
      notes.push(`[showing the first ${shownMax} of ${of} entries]`);
    }
    return { ok: true, text: out.finish(notes) };
  } catch (err) {
    return toolError('ls', err);
  }
};
