/**
 * A file the user named that cannot be used is reported as that file and what is wrong with
 * it (exit 2), never as a lost daemon connection (exit 3) or an internal error: a missing or
 * directory --input, an `audit export -o` destination that exists or whose directory does not.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCommand, type RunResult } from '../../helpers/cli.js';

const ROOT = join(__dirname, '..', '..', '..');
const CLI = join(ROOT, 'dist', 'src', 'cli', 'main.js');
const REPO = join(ROOT, 'test', 'fixtures', 'builtin-repo');
const base = mkdtempSync(join(tmpdir(), 'fusion-cli-diag-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));
const TASK = `investigate-${'0'.repeat(32)}`;

function fusion(args: string[]): { code: number | null; stdout: string; stderr: string } {
  const home = join(base, 'home');
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 20_000, input: '', env: { ...process.env, FUSION_HOME: home, FUSION_SOCKET: join(base, 'none.sock') } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('fusion names the file that cannot be used', () => {
  it('a missing --input file is an input error naming it, not daemon_unavailable', () => {
    const missing = join(base, 'no-such-input.json');
    const r = fusion(['investigate', '--input', missing, '--repo', REPO]);
    expect({ code: r.code, stderr: r.stderr.trim() }).toEqual({ code: 2, stderr: `fusion: invalid_input: --input ${missing}: no such file` });
  });

  it('--input DIR is an input error saying it is a directory, not internal_error EISDIR', () => {
    const r = fusion(['research', '--input', base, '--repo', REPO]);
    expect({ code: r.code, stderr: r.stderr.trim() }).toEqual({ code: 2, stderr: `fusion: invalid_input: --input ${base}: it is a directory, not a file` });
  });

  it('fusion validate with a missing file names it', () => {
    const r = fusion(['validate', 'fusion_investigate', join(base, 'gone.json')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${join(base, 'gone.json')}: no such file`);
  });

  it('audit export onto an existing file says it exists and is never overwritten (and leaves it alone)', () => {
    const existing = join(base, 'exists.tar');
    writeFileSync(existing, 'keep me');
    const r = fusion(['audit', 'export', TASK, '-o', existing]);
    expect({ code: r.code, stderr: r.stderr.trim() }).toEqual({ code: 2, stderr: `fusion: invalid_input: -o ${existing}: it already exists and is never overwritten; remove it or choose another path` });
    expect(readFileSync(existing, 'utf8')).toBe('keep me');
  });

  it('audit export into a directory that does not exist names that directory, not a lost daemon', () => {
    const dir = join(base, 'no-such-dir');
    const r = fusion(['audit', 'export', TASK, '-o', join(dir, 'out.tar')]);
    expect({ code: r.code, stderr: r.stderr.trim() }).toEqual({ code: 2, stderr: `fusion: invalid_input: -o ${join(dir, 'out.tar')}: its directory ${dir} does not exist (create it first, or choose another path)` });
  });

  it('audit export -o DIR says to give a file name inside it', () => {
    const dir = join(base, 'a-dir');
    mkdirSync(dir);
    const r = fusion(['audit', 'export', TASK, '-o', dir]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe(`fusion: invalid_input: -o ${dir}: it already exists and is never overwritten; remove it or choose another path`);
  });

  it('audit verify of a missing tarball file names it', () => {
    const missing = join(base, 'missing.tar');
    const r = fusion(['audit', 'verify', missing]);
    expect({ code: r.code, stderr: r.stderr.trim().split('\n').pop() }).toEqual({ code: 2, stderr: `fusion: invalid_input: FILE ${missing}: no such file` });
  });
});

describe('egress seams given to a CLI whose daemon already runs', () => {
  it('are refused (exit 2) naming them when that daemon lacks them, never ignored in silence; a daemon that has them takes the task', async () => {
    const { startDaemon, buildConfig } = await import('../../../src/main.js');
    const { silentLogger } = await import('../../../src/log.js');
    // A runner that does nothing until stopped: only the submit path is asked.
    const runner = { run: ({ signal }: { signal: AbortSignal }) => new Promise<never>((_r, reject) => signal.addEventListener('abort', () => reject(new Error('stopped')), { once: true })) };
    // Run asynchronously: the daemon answering it lives in this process.
    const research = (socket: string): Promise<RunResult> => runCommand(process.execPath, [CLI, 'research', '--source', 'http://vm.test:18080/a.html', '--purpose', 'API docs', '--objective', 'What limits apply', '--background', 'A client', '--deliverable', 'The limits', '--resolve', 'vm.test:127.0.0.2', '--allow-cidr', '127.0.0.2/32', '--repo', REPO, '--socket', socket, '--json'],
      { env: { ...process.env, FUSION_HOME: join(base, 'seams-client') }, timeoutMs: 30_000 });
    for (const seams of [false, true]) {
      const home = join(base, seams ? 'with-seams' : 'no-seams');
      const daemon = await startDaemon(buildConfig({ home, socketPath: join(home, 'fusion.sock'), logLevel: 'silent', ...(seams ? { egressResolve: ['vm.test:127.0.0.2'], egressAllowCidrs: ['127.0.0.2/32'] } : {}) }), { runner, log: silentLogger() });
      try {
        const r = await research(daemon.socketPath);
        if (seams) {
          expect(r.code, r.stderr).toBe(0);
          expect(JSON.parse(r.stdout).taskId).toMatch(/^research-/);
        } else {
          expect(r.code, r.stderr).toBe(2);
          expect(r.stderr).toContain(`--resolve vm.test:127.0.0.2, --allow-cidr 127.0.0.2/32 configure the daemon that fetches, and the daemon at ${daemon.socketPath} is already running without them`);
        }
      } finally {
        await daemon.close();
      }
    }
  }, 60_000);
});
