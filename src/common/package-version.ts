/**
 * The one version source: the `version` of this package's package.json, found by walking up from
 * this module (it runs from src/common/ under vitest and from dist/src/common/ when built).
 * The MCP server, `GET /v1/health` and the child image tag all report it.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE_NAME = 'fusion-supervisor';

let cached: string | undefined;

export function packageVersion(): string {
  if (cached !== undefined) return cached;
  cached = '0.0.0';
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === PACKAGE_NAME && pkg.version) {
        cached = pkg.version;
        break;
      }
    } catch {
      // not here
    }
    if (dir === dirname(dir)) break;
  }
  return cached;
}
