/**
 * Every shell and TypeScript block of README.md and docs/*.md runs, exactly as written, and
 * must succeed: a reader who pastes one gets what the doc says. What a block asserts is its own
 * business (a `curl -f`, a `grep -q`, a loop that waits for a state); this test checks its exit
 * status only, so a change of output elsewhere breaks a block only where the doc relies on it.
 *
 * - Shell (`sh`, `bash`, `shell`): `bash -e -o pipefail -c BLOCK` from the repository root, with
 *   the built CLI on PATH as `fusion`, a fresh empty FUSION_HOME, HOME and TMPDIR, and two free
 *   loopback ports as WEB_PORT and API_PORT (a doc takes a port from `${API_PORT:-…}` with a
 *   free one as its default, never a fixed one). The block runs in its own process group: it must
 *   leave nothing running in it (a daemon it orphaned, say) and nothing in its TMPDIR (a
 *   `mktemp -d` it forgot); whatever it left is then killed. A block that defines its own
 *   fallback for a missing `fusion` (`command -v fusion … || fusion() { … }`) runs a second time
 *   without `fusion` on PATH, so that fallback is what it uses.
 * - TypeScript (`ts`, `typescript`): in a fresh project made as the README says (`npm init -y`,
 *   `"type": "module"`, `npm install` of this clone, offline), type-checked as that project sees
 *   the package, compiled as it is, and run with a copy of the e2e fixture repository as its first
 *   argument and a fresh FUSION_HOME (the builtin engine, real bwrap sandboxes).
 * - JSON blocks must parse; other languages (toml, untagged output and synopses) are text.
 *
 * A block is kept from running only by `<!-- not-run: REASON -->` on the line just above its
 * fence, for what needs a human, root-only host changes or destructive context. That list is
 * printed, bounded and must give reasons.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import { copyFixtureRepo, ROOT } from '../workflow/helpers.js';
import { allSnippets, docFiles, SHELL_LANGS, strayMarkers, TS_LANGS, type Snippet } from './snippets.js';

const CLI = join(ROOT, 'dist', 'src', 'cli', 'main.js');
const BWRAP = '/usr/bin/bwrap';
/** Blocks allowed to carry a not-run marker; raise it only with a reason nobody can remove. */
const MAX_NOT_RUN = 5;
const KNOWN_TEXT_LANGS = new Set(['', 'json', 'toml', 'text']);
const BLOCK_TIMEOUT_MS = 150_000;

const snippets = allSnippets(ROOT);
const runnable = (s: Snippet): boolean => (SHELL_LANGS.has(s.lang) || TS_LANGS.has(s.lang)) && s.notRun === undefined;
const where = (s: Snippet): string => `${s.file}:${String(s.line)}`;

const scratch = mkdtempSync(join(tmpdir(), 'fsn-docs-'));
chmodSync(scratch, 0o755);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Processes (`pid command`) still alive in the block's process group when the block exited. */
  leftover: string[];
}

/**
 * The live members of a process group, from /proc: zombies do not count (an orphan's zombie may
 * never be reaped on a host whose init does not reap, and it runs nothing).
 */
function livingInGroup(pgid: number): string[] {
  const out: string[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/u.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // After the command's closing parenthesis: state, ppid, pgrp, …
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) !== pgid || state === 'Z') continue;
    let cmd = '';
    try {
      cmd = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ').trim();
    } catch {
      // gone meanwhile
    }
    out.push(`${name} ${cmd}`);
  }
  return out;
}

/** Runs a command in its own process group; at exit or timeout every process left in the group is killed. */
function run(cmd: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number }): Promise<Ran> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: options.cwd, env: options.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const killGroup = (signal: NodeJS.Signals): void => {
      try {
        process.kill(-child.pid!, signal);
      } catch {
        // the group is gone
      }
    };
    const timer = setTimeout(() => {
      stderr += `\n[docs test] timed out after ${String(options.timeoutMs)} ms\n`;
      killGroup('SIGKILL');
    }, options.timeoutMs);
    let exit: { code: number | null; signal: NodeJS.Signals | null; leftover: string[] } = { code: null, signal: null, leftover: [] };
    child.once('exit', (code, signal) => {
      exit = { code, signal, leftover: livingInGroup(child.pid!) };
      // Background jobs a block forgot (or a failure left) must not outlive it; they also hold
      // its output pipes open.
      killGroup('SIGTERM');
      setTimeout(() => killGroup('SIGKILL'), 2_000).unref();
    });
    child.once('close', () => {
      clearTimeout(timer);
      resolve({ ...exit, stdout, stderr });
    });
  });
}

function report(s: Snippet, r: Ran): string {
  const tail = (t: string): string => t.split('\n').slice(-40).join('\n');
  return `${where(s)} exited ${String(r.code ?? r.signal)}\n--- block ---\n${s.code}--- stdout (tail) ---\n${tail(r.stdout)}\n--- stderr (tail) ---\n${tail(r.stderr)}`;
}

/** A fresh directory per block: its HOME, FUSION_HOME and TMPDIR, and `fusion` on PATH (unless `withoutFusion`). */
async function blockEnv(name: string, withoutFusion = false): Promise<{ dir: string; env: NodeJS.ProcessEnv }> {
  const dir = mkdtempSync(join(scratch, `${name}-`));
  chmodSync(dir, 0o755);
  for (const sub of ['bin', 'home', 'tmp', 'fusion-home']) mkdirSync(join(dir, sub), { mode: 0o700 });
  writeFileSync(join(dir, 'bin', 'fusion'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} "$@"\n`, { mode: 0o755 });
  const env: NodeJS.ProcessEnv = {
    PATH: withoutFusion ? pathWithoutFusion() : `${join(dir, 'bin')}:${process.env.PATH ?? '/usr/bin:/bin'}`,
    HOME: join(dir, 'home'),
    TMPDIR: join(dir, 'tmp'),
    FUSION_HOME: join(dir, 'fusion-home'),
    WEB_PORT: String(await freePort()),
    API_PORT: String(await freePort()),
    LANG: 'C.UTF-8',
    ...(process.env.CI === undefined ? {} : { CI: process.env.CI }),
  };
  return { dir, env };
}

/** This process's PATH without any directory that holds a `fusion` (an `npm link` of this host), node kept. */
function pathWithoutFusion(): string {
  const dirs = (process.env.PATH ?? '/usr/bin:/bin').split(':').filter((d) => d !== '' && !existsSync(join(d, 'fusion')));
  const nodeDir = process.execPath.slice(0, process.execPath.lastIndexOf('/'));
  return [...new Set([nodeDir, ...dirs])].join(':');
}

/** A block that falls back to a `fusion` function of its own when none is on PATH. */
const FALLBACK = /command -v fusion\b[^\n]*\|\|\s*fusion\(\)/u;

function prerequisites(): string | undefined {
  if (!existsSync(CLI)) return 'dist/ is not built (npx tsc -p tsconfig.build.json)';
  if (!existsSync(BWRAP)) return `${BWRAP} is missing (apt-get install bubblewrap)`;
  for (const tool of ['python3', 'curl']) if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) return `${tool} is missing (the README walkthrough uses it)`;
  return undefined;
}

describe('the docs blocks themselves', () => {
  it('finds the blocks of every doc, each with a known language', () => {
    expect(docFiles(ROOT).length).toBeGreaterThanOrEqual(5);
    expect(snippets.filter((s) => SHELL_LANGS.has(s.lang)).length).toBeGreaterThanOrEqual(3);
    expect(snippets.filter((s) => TS_LANGS.has(s.lang)).length).toBeGreaterThanOrEqual(1);
    const unknown = snippets.filter((s) => !SHELL_LANGS.has(s.lang) && !TS_LANGS.has(s.lang) && !KNOWN_TEXT_LANGS.has(s.lang)).map((s) => `${where(s)} (${s.lang})`);
    expect(unknown, 'a block in a language this test neither runs nor knows as text').toEqual([]);
  });

  it('keeps the not-run list small, each with a reason, only on runnable languages, never stray', () => {
    const skipped = snippets.filter((s) => s.notRun !== undefined);
    console.info(`docs blocks not run (${String(skipped.length)}):\n${skipped.map((s) => `  ${where(s)}: ${s.notRun!}`).join('\n')}`);
    expect(skipped.length).toBeLessThanOrEqual(MAX_NOT_RUN);
    for (const s of skipped) {
      expect(s.notRun!.length, `${where(s)} needs a reason`).toBeGreaterThanOrEqual(10);
      expect(SHELL_LANGS.has(s.lang) || TS_LANGS.has(s.lang), `${where(s)}: a marker on a block that would not run anyway`).toBe(true);
    }
    const stray = docFiles(ROOT).flatMap((path) => strayMarkers(path, readFileSync(path, 'utf8')).map((line) => `${path}:${String(line)}`));
    expect(stray).toEqual([]);
  });

  it('every JSON block parses', () => {
    for (const s of snippets.filter((b) => b.lang === 'json')) expect(() => JSON.parse(s.code), where(s)).not.toThrow();
  });
});

const missing = prerequisites();
if (missing !== undefined && process.env.CI !== 'true') console.warn(`\n!!! SKIPPING the docs blocks that run: ${missing}\n`);
const describeRun = missing === undefined || process.env.CI === 'true' ? describe : describe.skip;

describeRun('the docs blocks run as written', () => {
  const shellRuns = snippets
    .filter((b) => runnable(b) && SHELL_LANGS.has(b.lang))
    .flatMap((b) => [{ s: b, withoutFusion: false }, ...(FALLBACK.test(b.code) ? [{ s: b, withoutFusion: true }] : [])]);
  for (const { s, withoutFusion } of shellRuns) {
    it(`${where(s)} (shell${withoutFusion ? ', its own fusion fallback' : ''}) exits 0 and leaves nothing running or in its TMPDIR`, async () => {
      if (missing !== undefined) throw new Error(missing);
      const { env } = await blockEnv('sh', withoutFusion);
      const r = await run('bash', ['-e', '-o', 'pipefail', '-c', s.code], { cwd: ROOT, env, timeoutMs: BLOCK_TIMEOUT_MS });
      expect(r.code, report(s, r)).toBe(0);
      expect(r.leftover, `${where(s)} left processes running\n${report(s, r)}`).toEqual([]);
      expect(readdirSync(env.TMPDIR!), `${where(s)} left files in its TMPDIR`).toEqual([]);
    }, BLOCK_TIMEOUT_MS + 10_000);
  }

  for (const s of snippets.filter((b) => runnable(b) && TS_LANGS.has(b.lang))) {
    it(`${where(s)} (TypeScript) type-checks and runs in a fresh npm project`, async () => {
      if (missing !== undefined) throw new Error(missing);
      const { dir, env } = await blockEnv('ts');
      const project = join(dir, 'project');
      mkdirSync(project);
      const npmEnv = { ...env, npm_config_cache: join(dir, 'npm-cache'), npm_config_update_notifier: 'false' };
      for (const args of [['init', '-y'], ['pkg', 'set', 'type=module'], ['install', '--offline', '--no-audit', '--no-fund', ROOT]]) {
        const r = await run('npm', args, { cwd: project, env: npmEnv, timeoutMs: 60_000 });
        expect(r.code, `npm ${args.join(' ')}\n${r.stderr}`).toBe(0);
      }
      const file = join(project, 'snippet.ts');
      writeFileSync(file, s.code);
      // The project's view of the package: NodeNext resolution through its node_modules.
      const program = ts.createProgram([file], {
        module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022,
        lib: ['lib.es2023.d.ts'], types: ['node'], typeRoots: [join(ROOT, 'node_modules', '@types')], strict: true, skipLibCheck: true, noEmit: true,
      });
      const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => `${d.file ? `${d.file.fileName}:` : ''} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
      expect(diagnostics, where(s)).toEqual([]);
      writeFileSync(join(project, 'snippet.js'), ts.transpileModule(s.code, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText);
      const fixture = copyFixtureRepo();
      try {
        const r = await run(process.execPath, ['snippet.js', fixture.repo], { cwd: project, env, timeoutMs: BLOCK_TIMEOUT_MS });
        expect(r.code, report(s, r)).toBe(0);
      } finally {
        rmSync(fixture.root, { recursive: true, force: true });
      }
    }, BLOCK_TIMEOUT_MS + 90_000);
  }
});
