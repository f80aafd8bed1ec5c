/**
 * The README's first program (examples/first-task.ts) is real: it type-checks against the
 * package's published entry (`fusion-supervisor` → dist/src/client/index.d.ts through
 * package.json `exports`), and, compiled as it is, it submits a task with an embedded daemon
 * (builtin engine, real bwrap sandboxes) over a copy of the fixture repository, follows its
 * events and prints the verified answer. The README shows the file verbatim.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';
import { afterAll, expect, it } from 'vitest';
import { copyFixtureRepo, describeWithBwrap, DIST, ROOT, RIGHT_FILE } from './helpers.js';

const EXAMPLE = join(ROOT, 'examples', 'first-task.ts');
const source = readFileSync(EXAMPLE, 'utf8');

it('the README shows examples/first-task.ts verbatim', () => {
  expect(readFileSync(join(ROOT, 'README.md'), 'utf8')).toContain(`\`\`\`ts\n${source}\`\`\``);
  expect(source.trimEnd().split('\n').length).toBeLessThanOrEqual(14);
});

it('type-checks against the package entry point (fusion-supervisor → the client library types)', () => {
  const program = ts.createProgram([EXAMPLE], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2023.d.ts'],
    types: ['node'],
    strict: true,
    noUncheckedIndexedAccess: true,
    skipLibCheck: true,
    noEmit: true,
  });
  const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  expect(diagnostics).toEqual([]);
  const entry = ts.resolveModuleName('fusion-supervisor', EXAMPLE, program.getCompilerOptions(), ts.sys).resolvedModule?.resolvedFileName;
  expect(entry).toBe(join(DIST, 'src', 'client', 'index.d.ts'));
});

describeWithBwrap('examples/first-task.ts runs end to end', () => {
  const home = mkdtempSync(join(tmpdir(), 'fsn-first-'));
  const fixture = copyFixtureRepo();
  afterAll(() => {
    rmSync(home, { recursive: true, force: true });
    rmSync(fixture.root, { recursive: true, force: true });
  });

  it('submits a task with an embedded daemon, follows its events and prints the verified answer', async () => {
    // Compiled as it is; inside the package so `fusion-supervisor` resolves to this package.
    const out = join(DIST, 'examples', 'first-task.mjs');
    mkdirSync(join(DIST, 'examples'), { recursive: true });
    writeFileSync(out, ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText);
    const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? home, FUSION_HOME: home, FUSION_SANDBOX: 'bwrap', FUSION_LOG_LEVEL: 'warn' };
    const started = Date.now();
    const child = spawn(process.execPath, [out, fixture.repo], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect({ code, stderr: code === 0 ? '' : stderr }).toEqual({ code: 0, stderr: '' });
    // Events followed: every transition, ending with the terminal one.
    expect(stderr).toMatch(/^state: initializing$/m);
    expect(stderr).toMatch(/^state: completed$/m);
    // Stage attempts are named, never a bare event kind.
    expect(stderr).toMatch(/^ {2}candidate-\d attempt 1: succeeded$/m);
    expect(stderr).not.toMatch(/^progress\s*$/m);
    // The verified answer, citing the file that implements the refill.
    expect(stdout).toMatch(/^Answer: \d+ bytes, sha256:[0-9a-f]{64} \(verified\)\./);
    expect(stdout).toContain(RIGHT_FILE);
    // The README promises an agent's first answer in under a minute.
    expect(Date.now() - started).toBeLessThan(60_000);
  }, 180_000);
});
