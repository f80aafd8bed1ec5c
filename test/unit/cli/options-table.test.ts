/**
 * The one options table (src/config/options.ts) and what is generated from it: the parser's flag
 * sets, the daemon settings, the help texts and shell completion. Documentation cannot drift:
 * every option appears in its command's help, and every flag README and docs/operations.md show
 * for a command parses for that command. Also the CLI frame: global flags before the command,
 * --version, and the exit codes a script relies on (README's table equals cli/exit-codes.ts).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseArgs } from '../../../src/config/args.js';
import { COMMANDS, OPTIONS, flagSpecFor, helpOptionsOf, isCommand, optionsOf, type Command } from '../../../src/config/options.js';
import { daemonConfigInput } from '../../../src/config/settings.js';
import { buildConfig } from '../../../src/main.js';
import { configFieldLabel } from '../../../src/config/options.js';
import { COMMAND_HELP, HELP } from '../../../src/cli/help.js';
import { completionScript } from '../../../src/cli/completion.js';
import { runCli, splitGlobals } from '../../../src/cli/main.js';
import { EXIT_CODES } from '../../../src/cli/exit-codes.js';
import { FusionError } from '../../../src/errors.js';

const ROOT = join(__dirname, '..', '..', '..');
const REPO = join(ROOT, 'test', 'fixtures', 'builtin-repo');

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function io() {
  const out = { stdout: '', stderr: '' };
  return { out, io: { stdout: (t: string) => void (out.stdout += t), stderr: (t: string) => void (out.stderr += t), readStdin: () => '' } };
}

/** Every `fusion COMMAND … --flag` a text shows: the command and its flags, continuation lines included. */
function documentedFlags(text: string): Array<{ command: Command; flag: string; where: string }> {
  const found: Array<{ command: Command; flag: string; where: string }> = [];
  const add = (command: string, segment: string, where: string): void => {
    if (!isCommand(command)) return;
    for (const m of segment.matchAll(/(?<![\w-])--([a-z][a-z-]*)/gu)) found.push({ command, flag: m[1]!, where });
  };
  // Code blocks: a line starting with `fusion CMD` opens a command; indented lines continue it.
  for (const block of text.matchAll(/```[a-z]*\n([\s\S]*?)```/gu)) {
    let current: string | undefined;
    for (const line of block[1]!.split('\n')) {
      const head = /^\s*(?:sudo\s+)?fusion\s+([a-z]+)\b/u.exec(line);
      if (head) current = head[1];
      else if (!/^\s{4,}\S/u.test(line)) current = undefined;
      if (current === undefined) continue;
      // `fusion status ID | fusion tasks …`: each `fusion CMD` segment belongs to its own command.
      // A segment naming no command (`fusion COMMAND --help`, `fusion --version`) is the global form.
      for (const seg of line.split(/(?:\|\s*|\s{2,}|\(also:\s*)(?=fusion\s)/u)) {
        const own = /^\s*(?:sudo\s+)?fusion\s+(\S+)/u.exec(seg);
        if (own && !isCommand(own[1]!)) continue;
        add(own ? own[1]! : current, seg, line.trim());
      }
    }
  }
  // Inline code: `fusion CMD … --flag …`.
  for (const span of text.matchAll(/`((?:sudo\s+)?fusion\s+([a-z]+)\b[^`]*)`/gu)) add(span[2]!, span[1]!, span[1]!);
  return found;
}

describe('the options table', () => {
  it('no command takes one flag twice, and every row names a known command', () => {
    for (const c of COMMANDS) {
      const flags = optionsOf(c).flatMap((o) => (o.flag === undefined ? [] : [o.flag]));
      expect(new Set(flags).size, `fusion ${c} has a flag twice`).toBe(flags.length);
    }
    for (const o of OPTIONS) for (const c of o.commands) expect(COMMANDS).toContain(c);
  });

  it('fusion daemon --sandbox-uids A-B parses and reaches the daemon settings', () => {
    const args = parseArgs(['--sandbox-uids', '3000000-3000099', '--data', '/tmp/h'], flagSpecFor('daemon'), 'daemon');
    expect(daemonConfigInput(args, {}).sandboxUids).toBe('3000000-3000099');
    expect(daemonConfigInput(parseArgs(['--data', '/tmp/h'], flagSpecFor('daemon')), { FUSION_SANDBOX_UIDS: '5-9' }).sandboxUids).toBe('5-9');
  });

  it('every option of a command appears in that command\'s help; every flag in the overview parses for its command', () => {
    for (const c of COMMANDS) {
      const shown = new Set(helpOptionsOf(c));
      for (const o of optionsOf(c)) {
        // A daemon setting an embedded daemon does not need is listed by fusion daemon --help, which the command's help names.
        const help = shown.has(o) ? COMMAND_HELP[c] : COMMAND_HELP.daemon;
        if (!shown.has(o)) expect(COMMAND_HELP[c]).toContain("see 'fusion daemon --help'");
        if (o.flag !== undefined) expect(help, `fusion ${c} --help lacks --${o.flag}`).toContain(`--${o.flag}`);
        if (o.env !== undefined) expect(help, `fusion ${c} --help lacks ${o.env}`).toContain(o.env);
        if (o.env !== undefined) expect(HELP, `fusion help lacks ${o.env}`).toContain(o.env);
      }
      expect(COMMAND_HELP[c]).toMatch(/Examples:\n {2}\S/u);
    }
    const inHelp = documentedFlags(`\`\`\`\n${HELP}\`\`\``);
    expect(inHelp.length).toBeGreaterThan(40);
    for (const d of inHelp) expect(flagSpecFor(d.command), `fusion help shows ${d.where}: --${d.flag} is not a flag of fusion ${d.command}`).toHaveProperty([d.flag]);
  });

  it('a task command\'s help lists the options it uses and the embedded-daemon ones that matter for --wait, not the daemon-only ones', () => {
    for (const c of ['investigate', 'research', 'mcp'] as const) {
      const options = COMMAND_HELP[c].slice(COMMAND_HELP[c].indexOf('\nOptions:'));
      for (const daemonOnly of ['--listen', '--research-db', '--socket-group GROUP', '--concurrency', '--database-url', 'REDIS_URL']) expect(options, `fusion ${c} --help`).not.toContain(daemonOnly);
      for (const used of ['--sandbox', '--sandbox-rlimit-fallback', '--log-level', '--models-file', '--resolve']) expect(options, `fusion ${c} --help`).toContain(used);
    }
    expect(COMMAND_HELP.investigate).toContain('--objective');
    // Still accepted: an embedded daemon takes every daemon setting.
    expect(flagSpecFor('investigate')).toHaveProperty(['concurrency']);
    expect(helpOptionsOf('daemon')).toEqual(optionsOf('daemon'));
  });

  it.each(['README.md', 'docs/operations.md'])('every flag %s shows for a fusion command parses for that command', (file) => {
    const text = readFileSync(join(ROOT, file), 'utf8');
    const documented = documentedFlags(text);
    expect(documented.length).toBeGreaterThan(20);
    const wrong = documented.filter((d) => !(d.flag in flagSpecFor(d.command))).map((d) => `--${d.flag} (fusion ${d.command}: ${d.where})`);
    expect(wrong).toEqual([]);
    // The daemon flag table of operations.md: each `--flag` row is a flag of fusion daemon.
    if (file === 'docs/operations.md') {
      const rows = [...text.matchAll(/^\| `--([a-z-]+)[^|]*\|/gmu)].map((m) => m[1]!);
      expect(rows.length).toBeGreaterThan(10);
      for (const f of rows) expect(flagSpecFor('daemon'), `operations.md lists --${f} for the daemon`).toHaveProperty([f]);
    }
  });

  it('completion offers exactly each command\'s flags', () => {
    const bash = completionScript('bash');
    expect(bash).toContain(`daemon) opts="${Object.keys(flagSpecFor('daemon')).map((f) => `--${f}`).join(' ')}"`);
    expect(bash).toContain('--sandbox-uids');
    expect(completionScript('zsh')).toMatch(/^#compdef fusion/u);
    expect(() => completionScript('fish')).toThrow(/bash or zsh/u);
  });

  it('the bash script completes a command after global flags, and that command\'s flags', () => {
    const script = `${completionScript('bash')}
COMP_WORDS=(fusion --data /x daemon --sandbox-u); COMP_CWORD=4; _fusion; echo "\${COMPREPLY[*]}"
COMP_WORDS=(fusion ta); COMP_CWORD=1; _fusion; echo "\${COMPREPLY[*]}"`;
    const r = spawnSync('bash', ['-c', script], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('--sandbox-uids\ntasks\n');
  });
});

describe('--json wherever a command prints data', () => {
  it.each(['investigate', 'research', 'status', 'tasks', 'result', 'wait', 'cancel', 'validate', 'models', 'fetch', 'search', 'keys', 'audit'] as const)('fusion %s takes --json', (c) => {
    expect(flagSpecFor(c)).toHaveProperty(['json']);
  });

  it('fusion keys signing-init/signing-public --json print the key id and PEM as JSON; validate --json prints JSON', async () => {
    const home = mkdtempSync(join(tmpdir(), 'fusion-opts-keys-'));
    cleanups.push(() => rmSync(home, { recursive: true, force: true }));
    const created = io();
    expect(await runCli(['keys', 'signing-init', '--data', home, '--json'], {}, created.io)).toBe(0);
    const init = JSON.parse(created.out.stdout) as { keyId: string; publicKeyPem: string; unsignedBeforeKey: unknown; unfinishedTasks: number };
    expect(init.publicKeyPem).toContain('BEGIN PUBLIC KEY');
    // A fresh data directory: no task was sealed before the key, none is unfinished.
    expect(init).toMatchObject({ unsignedBeforeKey: { file: join(home, 'signing-key.unsigned-before.json'), tasks: [] }, unfinishedTasks: 0 });
    const shown = io();
    expect(await runCli(['--json', 'keys', 'signing-public', '--data', home], {}, shown.io)).toBe(0);
    expect(JSON.parse(shown.out.stdout)).toEqual({ keyId: init.keyId, publicKeyPem: init.publicKeyPem });
    const validated = io();
    validated.io.readStdin = () => '{"objective":"o","background":[],"deliverable":"d"}';
    expect(await runCli(['validate', 'fusion_investigate', '--json'], {}, validated.io)).toBe(0);
    expect(JSON.parse(validated.out.stdout)).toMatchObject({ objective: 'o', background: [] });
  });
});

describe('bad values name the flag or variable and the fix', () => {
  const daemonArgs = (argv: string[]) => parseArgs(['--data', '/tmp/h', ...argv], flagSpecFor('daemon'), 'daemon');
  it('a malformed value names the flag (or the variable it came from)', () => {
    expect(() => daemonConfigInput(daemonArgs(['--concurrency', 'four']), {})).toThrow('--concurrency must be a whole number, got "four"; fix it (e.g. --concurrency N)');
    expect(() => daemonConfigInput(daemonArgs([]), { FUSION_TASK_CONCURRENCY: 'x' })).toThrow('FUSION_TASK_CONCURRENCY must be a whole number');
    expect(() => daemonConfigInput(daemonArgs(['--sandbox', 'vm']), {})).toThrow('--sandbox must be one of auto, bwrap, docker, gvisor');
    expect(() => daemonConfigInput(daemonArgs([]), { FUSION_KEEP_ATTEMPT_FILES: 'maybe' })).toThrow('FUSION_KEEP_ATTEMPT_FILES must be 1 (on) or 0 (off)');
  });
  it('an out-of-range value names the setting with its flag and variable', () => {
    const input = daemonConfigInput(daemonArgs(['--concurrency', '99']), {});
    expect(() => buildConfig(input, configFieldLabel)).toThrow(/taskConcurrency \(--concurrency \/ FUSION_TASK_CONCURRENCY\)/u);
  });
  it('an unknown flag names the command and where its flags are listed', () => {
    expect(() => parseArgs(['--bogus'], flagSpecFor('tasks'), 'tasks')).toThrow("unknown flag --bogus for fusion tasks; its flags are listed by 'fusion tasks --help'");
  });
});

describe('the CLI frame', () => {
  it('global flags may come before the command; they land before a bare --', () => {
    expect(splitGlobals(['--data', '/x', 'tasks', '--json'])).toEqual({ command: 'tasks', rest: ['--json', '--data', '/x'], version: false });
    expect(splitGlobals(['--socket=/s', 'sandbox', 'exec', '--', 'ls'])).toEqual({ command: 'sandbox', rest: ['exec', '--socket=/s', '--', 'ls'], version: false });
    expect(() => splitGlobals(['--concurrency', '2', 'daemon'])).toThrow(/cannot come before the command/u);
  });

  it('fusion --data DIR tasks talks to that directory\'s socket', async () => {
    const home = mkdtempSync(join(tmpdir(), 'fusion-opts-'));
    cleanups.push(() => rmSync(home, { recursive: true, force: true }));
    const { io: cliIo } = io();
    const err = await runCli(['--data', home, 'tasks'], {}, cliIo).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FusionError);
    expect((err as FusionError).message).toContain(join(home, 'fusion.sock'));
  });

  it('fusion --version prints the version and exits 0', async () => {
    const { out, io: cliIo } = io();
    expect(await runCli(['--version'], {}, cliIo)).toBe(0);
    expect(out.stdout).toMatch(/^fusion \d+\.\d+\.\d+\n$/u);
  });
});

/** A daemon stand-in on a Unix socket whose task is still running. */
async function runningTaskDaemon(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'fusion-opts-sock-'));
  const socket = join(dir, 'fusion.sock');
  const task = { taskId: `investigate-${'1'.repeat(32)}`, workflow: 'investigate', state: 'running', status: 'running', createdAt: '2026-01-01T00:00:00Z', error: null, usage: null };
  const server: Server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url?.includes('/wait')) res.end(JSON.stringify({ terminal: false, task, notification: null }));
    else if (req.url?.includes('/result')) res.end(JSON.stringify({ taskId: task.taskId, status: 'running', state: 'running', answer: { present: false } }));
    else res.end(JSON.stringify(task));
  });
  await new Promise<void>((r) => server.listen(socket, r));
  cleanups.push(() => {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return socket;
}

describe('exit codes a script can trust', () => {
  const id = `investigate-${'1'.repeat(32)}`;
  it('fusion wait whose timeout expires exits 124 and says "timed out"', async () => {
    const socket = await runningTaskDaemon();
    const { out, io: cliIo } = io();
    expect(await runCli(['wait', id, '--timeout', '0', '--socket', socket], {}, cliIo)).toBe(124);
    expect(out.stderr).toContain('timed out after 0 s');
  });

  it('fusion result on a running task exits 75 and says it is still running', async () => {
    const socket = await runningTaskDaemon();
    const { out, io: cliIo } = io();
    expect(await runCli(['result', id, '--socket', socket], {}, cliIo)).toBe(75);
    expect(out.stdout).toContain('is still running');
  });

  it('fusion investigate without --background is refused as fusion validate refuses it, naming the flag', async () => {
    const { io: cliIo } = io();
    const err = await runCli(['investigate', '--objective', 'o', '--deliverable', 'd', '--repo', REPO], {}, cliIo).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FusionError);
    expect((err as FusionError).code).toBe('invalid_input');
    expect((err as FusionError).message).toBe('missing required flag(s): --background');
  });

  it("README's exit code table is cli/exit-codes.ts", () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const section = /<a id="exit-codes"><\/a>[\s\S]*?\n\n((?:\|.*\n)+)/u.exec(readme)?.[1] ?? '';
    const rows = section
      .split('\n')
      .slice(2)
      .filter(Boolean)
      .map((l) => l.split('|').map((c) => c.trim()));
    expect(rows.map((r) => ({ code: Number(r[1]!.replace(/`/gu, '')), meaning: r[2] }))).toEqual(EXIT_CODES.map((e) => ({ code: e.code, meaning: e.meaning })));
  });
});
