/**
 * Research sources from the command line, read without guessing: `--source URL --purpose TEXT`
 * pairs, or one `--source URL=PURPOSE` value split only where the split cannot misread the URL.
 */
import { usageError } from '../config/args.js';

export interface SourceArg {
  url: string;
  purpose: string;
}

/**
 * Splits `URL=PURPOSE` at the first `=`, refusing what stays ambiguous: an `=` after a `?` or
 * `#` may belong to the query string or fragment, and a purpose without spaces that contains
 * URL punctuation may be the rest of the URL.
 */
export function splitSourceValue(value: string): SourceArg {
  const eq = value.indexOf('=');
  if (eq <= 0 || eq === value.length - 1) {
    throw usageError(`--source ${JSON.stringify(value)} has no purpose: give --source URL --purpose TEXT (or --source URL=PURPOSE)`);
  }
  const url = value.slice(0, eq);
  const purpose = value.slice(eq + 1);
  if (/[?#]/u.test(url) || (!/\s/u.test(purpose) && /[=&?#/]/u.test(purpose))) {
    throw usageError(`--source ${JSON.stringify(value)} is ambiguous: its "=" may belong to the URL; give the URL and its purpose separately: --source URL --purpose TEXT`);
  }
  return { url, purpose };
}

/**
 * Pairs the `--source` and `--purpose` flags in command-line order: a `--purpose` belongs to the
 * `--source` just before it; a `--source` without one must carry its purpose as `URL=PURPOSE`.
 */
export function sourcesFrom(order: ReadonlyArray<readonly [string, string]>): SourceArg[] {
  const out: SourceArg[] = [];
  let pending: string | undefined;
  for (const [name, value] of order) {
    if (name === 'source') {
      if (pending !== undefined) out.push(splitSourceValue(pending));
      pending = value;
    } else if (name === 'purpose') {
      if (pending === undefined) throw usageError(`--purpose ${JSON.stringify(value)} must follow the --source it describes`);
      out.push({ url: pending, purpose: value });
      pending = undefined;
    }
  }
  if (pending !== undefined) out.push(splitSourceValue(pending));
  return out;
}
