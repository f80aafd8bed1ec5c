/**
 * An opt-in memo of what the repository tools read, for a process whose repository cannot
 * change while it runs: the replay sandbox, which re-runs a candidate's calls over the task's
 * snapshot (root-owned, written once under its digest, mounted read-only). There the same
 * directories are listed and the same files read and split into lines by call after call (a
 * model greps the whole tree several times); with the memo each is read once per process, and
 * every call still runs the tool's own code over exactly those bytes, so its result is the one an
 * uncached run gives.
 *
 * Off unless `memoizeRepositoryReads` is called: the candidate child and the offline verifier
 * read the repository afresh on every call. Bounded by `MEMO_MAX_CHARS` of file text: past it,
 * files are read as if there were no memo (a cap-sized repository must not cost the replay's
 * memory limit).
 */
import type { Dirent } from 'node:fs';

/** Text held at most (UTF-16 code units, about twice that in bytes). */
export const MEMO_MAX_CHARS = 64 * 1024 * 1024;

let enabled = false;
let heldChars = 0;
const dirs = new Map<string, Dirent[] | null>();
const files = new Map<string, unknown>();

/** Turns the memo on for the rest of this process (the replay sandbox's entry point calls it). */
export function memoizeRepositoryReads(): void {
  enabled = true;
}

/** A directory's sorted entries (null: unreadable), listed by `list` the first time only. */
export async function memoDir(abs: string, list: () => Promise<Dirent[]>): Promise<Dirent[] | null> {
  if (!enabled) return list().catch(() => null);
  const held = dirs.get(abs);
  if (held !== undefined) return held;
  const listed = await list().catch(() => null);
  dirs.set(abs, listed);
  return listed;
}

/**
 * What `load` made of a file the first time (`key` names the file and every limit the result
 * depends on); `chars` is how much text it holds, counted against the bound.
 */
export async function memoFile<T>(key: string, load: () => Promise<{ value: T; chars: number }>): Promise<T> {
  if (!enabled) return (await load()).value;
  if (files.has(key)) return files.get(key) as T;
  const loaded = await load();
  if (heldChars + loaded.chars <= MEMO_MAX_CHARS) {
    heldChars += loaded.chars;
    files.set(key, loaded.value);
  }
  return loaded.value;
}
