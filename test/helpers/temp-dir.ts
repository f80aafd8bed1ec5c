/**
 * The one way a test makes a scratch directory: a fresh `mkdtemp` under the system temp directory
 * (each test process gets its own, so parallel files never share one), removed with everything in
 * it by `remove()`. Removing twice, or a directory already gone, is fine.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TempDir {
  readonly path: string;
  /** `path` joined with `parts`. */
  join(...parts: string[]): string;
  remove(): void;
}

export function tempDir(prefix = 'fusion-test-'): TempDir {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return {
    path,
    join: (...parts) => join(path, ...parts),
    remove: () => rmSync(path, { recursive: true, force: true }),
  };
}

/** A fresh scratch directory's path, for callers that remove it themselves. */
export function tempPath(prefix = 'fusion-test-'): string {
  return tempDir(prefix).path;
}
