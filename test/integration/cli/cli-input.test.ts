/**
 * The CLI's sharp edges: `--help` on every command prints that command's help and starts
 * nothing; `fusion help` lists every flag the README lists; input is validated before any
 * daemon is contacted (exit 2 with the exact message, even when no daemon runs).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(__dirname, '..', '..', '..');
const CLI = join(ROOT, 'dist', 'src', 'cli', 'main.js');
const REPO = join(ROOT, 'test', 'fixtures', 'builtin-repo');

function fusion(args: string[]): { code: number | null; stdout: string; stderr: string; home: string } {
  const home = join(mkdtempSync(join(tmpdir(), 'fusion-cli-')), 'home');
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 20_000, input: '', env: { ...process.env, FUSION_HOME: home, FUSION_SOCKET: join(home, 'none.sock') } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, home };
}

const COMMANDS = ['daemon', 'investigate', 'research', 'status', 'tasks', 'result', 'wait', 'cancel', 'validate', 'models', 'sandbox', 'fetch', 'mcp'];

describe('fusion CLI help', () => {
  it.each(COMMANDS)('fusion %s --help prints its help, exits 0 and starts nothing', (command) => {
    const r = fusion([command, '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/Usage/u);
    expect(r.stdout).toContain(`fusion ${command}`);
    expect(r.stderr).toBe('');
    // No daemon was started: it would have created its data directory and socket.
    expect(existsSync(r.home)).toBe(false);
  });

  it('fusion daemon --help with other flags still only prints help', () => {
    const r = fusion(['daemon', '--sandbox', 'bwrap', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('--allow-cidr');
    expect(existsSync(r.home)).toBe(false);
  });

  it('fusion help lists every flag the README lists, and fusion help COMMAND prints that command', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const block = /## CLI[\s\S]*?```\n([\s\S]*?)```/u.exec(readme)?.[1] ?? '';
    const flags = new Set(block.match(/--[a-z][a-z-]*/gu));
    expect(flags.size).toBeGreaterThan(20);
    const help = fusion(['help']);
    expect(help.code).toBe(0);
    for (const f of flags) expect(help.stdout, `fusion help is missing ${f}`).toContain(f);
    expect(fusion(['help', 'research']).stdout).toContain('--purpose');
  });
});

describe('fusion CLI validates input before contacting a daemon', () => {
  it('a bad investigate without --wait and without a daemon is an input error (exit 2), not daemon_unavailable', () => {
    const r = fusion(['investigate', '--objective', 'Find the tokenizer', '--background', 'calc', '--repo', REPO]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe('fusion: invalid_input: missing required flag(s): --deliverable');
    // Named as the flags the caller omitted, not the tool's keys.
    expect(fusion(['research', '--objective', 'o', '--repo', REPO]).stderr.trim()).toBe('fusion: invalid_input: missing required flag(s): --background, --deliverable');
  });

  it('a good investigate without a daemon gets past validation and says no daemon answered (exit 3)', () => {
    const r = fusion(['investigate', '--objective', 'Find the tokenizer', '--background', 'calc', '--deliverable', 'file', '--repo', REPO]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('daemon_unavailable');
    // A submitting command can run its own daemon: it says how.
    expect(r.stderr).toContain('add --wait');
  });

  it('a command that cannot start a daemon does not suggest --wait when none answers', () => {
    const r = fusion(['status', `investigate-${'0'.repeat(32)}`]);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/^fusion: daemon_unavailable: no fusion daemon answers on \S+; start one with 'fusion daemon'\n$/u);
  });

  it('with --json an error is also a JSON object on stdout, with the same exit code', () => {
    const down = fusion(['tasks', '--json']);
    expect(down.code).toBe(3);
    expect(JSON.parse(down.stdout)).toEqual({ error: { code: 'daemon_unavailable', message: expect.stringMatching(/^no fusion daemon answers on /u) } });
    expect(down.stderr).toMatch(/^fusion: daemon_unavailable: /u);
    const usage = fusion(['--json', 'wait', 'not-an-id']);
    expect(usage.code).toBe(2);
    expect(JSON.parse(usage.stdout).error.code).toBe('invalid_input');
    // Without --json, stdout stays empty.
    expect(fusion(['tasks']).stdout).toBe('');
  });

  it('refuses an ambiguous source and a bad source URL with exact messages', () => {
    const base = ['research', '--objective', 'o', '--background', 'b', '--deliverable', 'd', '--repo', REPO];
    const ambiguous = fusion([...base, '--source', 'https://example.com/search?q=1=docs']);
    expect(ambiguous.code).toBe(2);
    expect(ambiguous.stderr.trim()).toBe(
      'fusion: invalid_input: --source "https://example.com/search?q=1=docs" is ambiguous: its "=" may belong to the URL; give the URL and its purpose separately: --source URL --purpose TEXT',
    );
    const local = fusion([...base, '--source', 'http://127.0.0.1/x', '--purpose', 'p']);
    expect(local.code).toBe(2);
    expect(local.stderr).toContain('fusion: invalid_input: fusion_research.sources[0].url must be a declared public http(s) URL');
    // A query string is kept whole with --purpose: validation passes, then no daemon answers.
    const paired = fusion([...base, '--source', 'https://example.com/search?q=1&lang=en', '--purpose', 'search results']);
    expect(paired.code).toBe(3);
  });

  it('checks task ids and --timeout locally', () => {
    expect(fusion(['status', 'not-a-task']).stderr.trim()).toBe('fusion: invalid_input: "not-a-task" is not a task id (expected investigate-… or research-… followed by 32 hex digits)');
    expect(fusion(['wait', `investigate-${'0'.repeat(32)}`, '--timeout', '90000']).stderr.trim()).toBe('fusion: invalid_input: --timeout must be a number of seconds from 0 (report the state now) to 86400 (24 h)');
    // A candidate may run 50 min: a long wait passes validation (then no daemon answers, exit 3).
    expect(fusion(['wait', `investigate-${'0'.repeat(32)}`, '--timeout', '3600']).code).toBe(3);
    // A well-formed id gets past validation: then no daemon answers (exit 3).
    expect(fusion(['cancel', `research-${'a'.repeat(32)}`]).code).toBe(3);
  });

  it('checks the repository, --sandbox, tasks --state and --limit locally', () => {
    const missing = fusion(['investigate', '--objective', 'o', '--background', 'b', '--deliverable', 'd', '--repo', '/nonexistent/fusion-repo']);
    expect(missing.code).toBe(2);
    expect(missing.stderr.trim()).toBe('fusion: invalid_input: repo /nonexistent/fusion-repo is not a readable directory');
    expect(fusion(['tasks', '--state', 'sleeping']).stderr.trim()).toBe(
      'fusion: invalid_input: --state must be one of initializing, queued, candidates_running, candidates_complete, evaluating, evaluation_complete, merging, completed, failed, cancelled; got "sleeping"',
    );
    expect(fusion(['tasks', '--limit', 'ten']).code).toBe(2);
    // 0 would list nothing and call that "no tasks".
    expect(fusion(['tasks', '--limit', '0']).stderr.trim()).toBe('fusion: invalid_input: --limit must be a whole number from 1 to 1000, got "0"');
    expect(fusion(['investigate', '--sandbox', 'vm', '--objective', 'o', '--background', 'b', '--deliverable', 'd']).stderr.trim()).toBe('fusion: invalid_input: --sandbox must be one of auto, bwrap, docker, gvisor');
  });
});
