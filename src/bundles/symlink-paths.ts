/**
 * Whether a symlink of a repository tree stays inside it, decided over the tree's own entries
 * (the packer's walk, the unpacker's archive), never over the host filesystem.
 *
 * The target is resolved component by component the way the kernel would: `..` pops a
 * component, a component naming another symlink of the tree is replaced by that link's target
 * (40 hops at most, like the kernel's limit). Going above the tree's root, or an absolute target
 * anywhere on the way, means the link leaves the repository. A lexical check alone is not enough:
 * with `b → .`, the link `a → b/../x` looks like `x` but resolves to the root's parent.
 * Components that do not exist are taken as plain directories (a dangling link stays dangling,
 * and cannot climb out through them either).
 */

export type LinkLookup = (path: string) => { type: 'dir' } | { type: 'file' } | { type: 'symlink'; target: string } | undefined;

const MAX_HOPS = 40;

export function resolvesInside(lookup: LinkLookup, linkPath: string, target: string): boolean {
  if (target === '' || target.startsWith('/')) return false;
  const parts = linkPath.split('/').slice(0, -1);
  let pending = target.split('/');
  let hops = 0;
  while (pending.length > 0) {
    const c = pending.shift()!;
    if (c === '' || c === '.') continue;
    if (c === '..') {
      if (parts.length === 0) return false;
      parts.pop();
      continue;
    }
    const here = [...parts, c].join('/');
    const entry = lookup(here);
    if (entry?.type === 'symlink') {
      if (++hops > MAX_HOPS || entry.target === '' || entry.target.startsWith('/')) return false;
      pending = [...entry.target.split('/'), ...pending];
      continue;
    }
    parts.push(c);
  }
  return true;
}
