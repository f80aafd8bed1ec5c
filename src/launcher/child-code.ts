/**
 * The child code a Docker child image carries, and its digest: one implementation for both ends.
 * `scripts/build-child-image.sh` (`make image`) stages exactly `childCodeFiles` into the image at
 * /opt/fusion and labels the image with `childCodeDigest`; the Docker launcher's check computes
 * the same digest over this checkout's built tree and compares it with the image's label, so an
 * image built by another checkout, or before the child code changed, is named as such.
 *
 * The files are the runtime import closure of `sandbox/child-main.js` in a built tree (dist/),
 * following relative specifiers only: the child loads no npm package, and `node:` builtins come
 * with the runtime. The digest covers each file's path and bytes, in sorted path order, plus the
 * `package.json` the image adds (declaring ESM).
 */
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { sha256Hex } from '../contracts/sha256.js';

/** The child entry inside a built tree. */
export const CHILD_ENTRY = join('sandbox', 'child-main.js');
/** The package.json the image puts beside the child code (its files are ES modules). */
export const CHILD_PACKAGE_JSON = '{"type":"module","private":true}\n';

const IMPORT = /(?:^|[;\s])(?:import|export)\s+(?:[^'"]*?\sfrom\s+)?['"](\.{1,2}\/[^'"]+)['"]|import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/gmu;

/** The child's files in `distDir`, as sorted paths relative to it. Throws on an import leaving the tree. */
export function childCodeFiles(distDir: string): string[] {
  const root = resolve(distDir);
  const seen = new Set<string>();
  const queue = [join(root, CHILD_ENTRY)];
  while (queue.length > 0) {
    const file = queue.shift() as string;
    if (seen.has(file)) continue;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(IMPORT)) queue.push(resolve(dirname(file), (m[1] ?? m[2]) as string));
  }
  return [...seen]
    .map((file) => {
      const rel = relative(root, file);
      if (rel.startsWith('..')) throw new Error(`child import outside ${root}: ${file}`);
      return rel.split(sep).join('/');
    })
    .sort();
}

/** `sha256:<hex>` over the child's files (path, length and bytes of each) and the image's package.json. */
export function childCodeDigest(distDir: string): string {
  const parts: Buffer[] = [];
  const add = (name: string, bytes: Buffer): void => {
    parts.push(Buffer.from(`${name}\0${String(bytes.length)}\0`), bytes);
  };
  for (const rel of childCodeFiles(distDir)) add(rel, readFileSync(join(distDir, rel)));
  add('package.json', Buffer.from(CHILD_PACKAGE_JSON));
  return `sha256:${sha256Hex(Buffer.concat(parts))}`;
}
