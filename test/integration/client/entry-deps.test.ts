/**
 * A program that imports the library (the package entry, `src/client/index.ts`) loads none of the
 * daemon's drivers: sqlite3, pg and dockerode are optional peer dependencies only the daemon
 * needs (package.json `exports["./daemon"]`), and the embedded daemon is imported lazily, when a
 * client first starts one. Checked in a fresh Node process with a module-resolution hook that
 * records every module it loads; importing the daemon entry in the same way must load the
 * daemon's own packages, so the hook is seen to catch what it looks for.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../../helpers/temp-dir.js';

const ROOT = resolve(import.meta.dirname, '../../..');
const DAEMON_DRIVERS = ['sqlite3', 'pg', 'dockerode'];
const scratch = tempDir('fusion-entry-deps-');
afterAll(() => scratch.remove());

/** The npm packages and project files a fresh `import(specifier)` loads, from the package root. */
function loadedBy(specifier: string): { packages: Set<string>; files: string[] } {
  const log = join(scratch.path, `${specifier.replace(/\W/gu, '_')}.log`);
  const hooks = join(scratch.path, 'hooks.mjs');
  writeFileSync(hooks, [
    "import { appendFileSync } from 'node:fs';",
    'export async function resolve(specifier, context, next) {',
    '  const result = await next(specifier, context);',
    "  appendFileSync(process.env.FUSION_LOAD_LOG, result.url + '\\n');",
    '  return result;',
    '}',
  ].join('\n'));
  const register = join(scratch.path, 'register.mjs');
  writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);
  writeFileSync(log, '');
  const run = spawnSync(process.execPath, ['--import', pathToFileURL(register).href, '--input-type=module', '-e', `await import(${JSON.stringify(specifier)});`], {
    cwd: ROOT,
    env: { ...process.env, FUSION_LOAD_LOG: log },
    encoding: 'utf8',
    timeout: 60_000,
  });
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  const urls = readFileSync(log, 'utf8').split('\n').filter((u) => u.startsWith('file:'));
  const packages = new Set(urls.flatMap((u) => {
    const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//u.exec(u);
    return m ? [m[1]!] : [];
  }));
  const files = urls.filter((u) => !u.includes('/node_modules/')).map((u) => u.slice(pathToFileURL(ROOT).href.length + 1));
  return { packages, files };
}

describe('the package entry', () => {
  it('loads the client and none of sqlite3, pg, dockerode or the daemon', () => {
    const { packages, files } = loadedBy('fusion-supervisor');
    expect(files).toContain('dist/src/client/index.js');
    expect(DAEMON_DRIVERS.filter((name) => packages.has(name))).toEqual([]);
    expect(files).not.toContain('dist/src/main.js');
  });

  it('the daemon entry (fusion-supervisor/daemon) loads the daemon and its packages, and no driver before a daemon opens one', () => {
    const { packages, files } = loadedBy('fusion-supervisor/daemon');
    expect(files).toContain('dist/src/main.js');
    // The hook sees packages the daemon imports statically…
    expect(packages.has('pino')).toBe(true);
    expect(packages.has('zod')).toBe(true);
    // …and the drivers load with the backend that needs them (test/e2e/cli/optional-peers.test.ts).
    expect(DAEMON_DRIVERS.filter((name) => packages.has(name))).toEqual([]);
  });

  it('package.json keeps the drivers out of what a library user installs', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<string, Record<string, unknown>>;
    for (const name of DAEMON_DRIVERS) {
      expect(pkg.dependencies?.[name]).toBeUndefined();
      expect(pkg.peerDependenciesMeta?.[name]).toEqual({ optional: true });
      expect(pkg.devDependencies?.[name]).toBeDefined();
    }
    expect(pkg.dependencies?.cheerio).toBeUndefined();
  });
});
