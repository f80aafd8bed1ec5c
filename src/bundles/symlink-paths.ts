/**
 * Whether a symlink of a repository tree stays inside it, decided over the tree's own entries
 * (the packer's walk, the unpacker's archive), never over the host filesystem.
 *
 * The target is resolved component by component the way the kernel would: `..` pops a
 * component, a component naming another symlink of the tree is replaced by that link's target
 * (40 hops at most, like the kernel's limit, and 128 components looked at in all). Going above
 * the tree's root, or an absolute target anywhere on the way, means the link leaves the
 * repository. A lexical check alone is not enough:
 * with `b → .`, the link `a → b/../x` looks like `x` but resolves to the root's parent.
 * Components that do not exist are taken as plain directories (a dangling link stays dangling,
 * and cannot climb out through them either).
 */

export type LinkLookup = (path: string) => { type: 'dir' } | { type: 'file' } | { type: 'symlink'; target: string } | undefined;

const MAX_HOPS = 40;
/**
 * Components looked at per link, expansions included. Every bundle is read on the daemon's main
 * thread (at submission and again at checkout), so a link's cost must be small: without a bound,
 * 40 hops through a 33-component target are over 1300 steps a link, about a minute of blocking for a
 * cap-sized archive of such links. A source tree's links take a handful; one needing more counts
 * as leaving the tree (refused when read, left out when packed).
 */
const MAX_STEPS = 128;

export function resolvesInside(lookup: LinkLookup, linkPath: string, target: string): boolean {
  if (target === '' || target.startsWith('/')) return false;
  // The resolved directory as components, and the joined path of each prefix (no re-joining).
  const parts = linkPath.split('/').slice(0, -1);
  const joined: string[] = [];
  for (const p of parts) joined.push(joined.length === 0 ? p : `${joined.at(-1)!}/${p}`);
  let pending = target.split('/');
  let hops = 0;
  let steps = 0;
  while (pending.length > 0) {
    if (++steps > MAX_STEPS) return false;
    const c = pending.shift()!;
    if (c === '' || c === '.') continue;
    if (c === '..') {
      if (parts.length === 0) return false;
      parts.pop();
      joined.pop();
      continue;
    }
    const here = joined.length === 0 ? c : `${joined.at(-1)!}/${c}`;
    const entry = lookup(here);
    if (entry?.type === 'symlink') {
      if (++hops > MAX_HOPS || entry.target === '' || entry.target.startsWith('/')) return false;
      pending = [...entry.target.split('/'), ...pending];
      continue;
    }
    parts.push(c);
    joined.push(here);
  }
  return true;
}
