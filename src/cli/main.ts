#!/usr/bin/env node
/**
 * `fusion` CLI entry. Reads the environment, parses flags (the options table, config/options.ts),
 * dispatches to a command, maps errors to exit codes (cli/exit-codes.ts).
 *
 * Start-up cost: this module loads only the parser, the options table and the help texts; each
 * command imports what it needs when it runs (`fusion help` never loads the daemon).
 */
import { readFileSync, realpathSync, statSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { FusionError } from '../errors.js';
import type { Workflow } from '../contracts/constants.js';
import type { Daemon, ShutdownReport } from '../main.js';
import type { FusionClient } from '../client/index.js';
import { parseArgs, flag, flagAll, has, usageError, type ParsedArgs } from '../config/args.js';
import { configFieldLabel, flagSpecFor, optionFor, OPTIONS, type Command } from '../config/options.js';
import type { Env } from '../config/settings.js';
import { packageVersion } from '../common/package-version.js';
import type { Io } from './commands.js';
import type * as CommandsModule from './commands.js';
import { COMMAND_HELP, HELP, wantsHelp } from './help.js';
import { cliErrorOf, isConnectionLoss, quietOnEpipe, whileWaiting } from './daemon-gone.js';
import { EXIT, endedTaskExit } from './exit-codes.js';

function processIo(): Io {
  return {
    stdout: (t) => void process.stdout.write(t),
    stderr: (t) => void process.stderr.write(t),
    readStdin: () => readFileSync(0, 'utf8'),
  };
}

/** Task ids are `<workflow>-<32 hex>`: anything else is an input error before any daemon is asked. */
/** `fusion wait --timeout` bounds: a day at most; each daemon long-poll at most 600 s. */
const MAX_WAIT_S = 86_400;
const MAX_POLL_MS = 600_000;

const TASK_ID = /^(?:investigate|research)-[0-9a-f]{32}$/u;

function idArg(args: ParsedArgs, command: string): string {
  const id = args.positionals[0];
  if (!id) throw usageError(`${command} needs a task id`);
  if (!TASK_ID.test(id)) throw usageError(`${JSON.stringify(id)} is not a task id (expected investigate-… or research-… followed by 32 hex digits)`);
  if (args.positionals.length > 1) throw usageError(`${command} takes one task id, got ${args.positionals.length} arguments`);
  return id;
}

async function runDaemon(args: ParsedArgs, env: Env, io: Io): Promise<number> {
  const [{ buildConfig, startDaemon }, { daemonConfigInput }] = await Promise.all([import('../client/daemon-modules.js').then((m) => m.loadDaemonModule()), import('../config/settings.js')]);
  const config = buildConfig(daemonConfigInput(args, env), configFieldLabel);
  const daemon = await startDaemon(config, { env });
  // The handlers are in place before the "listening" line: whoever waits for that line to stop
  // the daemon (a supervisor, a test) must get the graceful stop, not the default death.
  const stopped = new Promise<ShutdownReport>((resolve) => {
    let stopping = false;
    const stop = (signal: string): void => {
      // A second signal while stopping ends the process now (the runs stay resumable, as at the deadline).
      if (stopping) {
        daemon.log.error({ signal, abandoned: [...daemon.tasks.runningTaskIds()] }, 'second signal during shutdown: exiting now');
        process.exit(1);
      }
      stopping = true;
      daemon.log.info({ signal, deadlineS: config.shutdownTimeoutS }, 'signal received');
      void daemon.stop().then(resolve);
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  });
  if (config.researchStore === 'memory') io.stderr('warning: --research-store memory: research runs are lost when this daemon stops\n');
  io.stderr(`fusion daemon listening on ${daemon.socketPath} (data ${config.home})\n`);
  if (daemon.tcp) io.stderr(`research API listening on http://${daemon.tcp.host.includes(':') ? `[${daemon.tcp.host}]` : daemon.tcp.host}:${daemon.tcp.port}\n`);
  const report = await stopped;
  if (report.exitCode !== 0) {
    io.stderr(`fusion daemon: shutdown deadline (${config.shutdownTimeoutS} s) passed while ${report.stuckAt ?? 'stopping'}; abandoned ${report.abandonedTasks.length} task run(s) and ${report.abandonedResearchRuns} research run(s), which resume later\n`);
    // Whatever still holds the event loop (a connection that never answers) must not keep it.
    process.exit(report.exitCode);
  }
  return 0;
}

/** The flag that fills each top-level tool argument (`--source` fills `sources`). */
const FLAG_OF_KEY: Readonly<Record<string, string>> = { objective: '--objective', background: '--background', deliverable: '--deliverable', sources: '--source' };

/** A missing top-level key of arguments built from flags, named as the flag the caller omitted. */
function asFlagError(err: unknown): unknown {
  const keys = err instanceof FusionError ? (err.details as { keys?: unknown; path?: unknown } | undefined) : undefined;
  if (!(err instanceof FusionError) || keys?.path !== undefined || !Array.isArray(keys?.keys) || !/missing required key/u.test(err.message)) return err;
  const flags = (keys.keys as string[]).map((k) => FLAG_OF_KEY[k] ?? k);
  return new FusionError('invalid_input', `missing required flag(s): ${flags.join(', ')}`, { cause: err, details: err.details });
}

async function submit(workflow: Workflow, args: ParsedArgs, env: Env, io: Io): Promise<number> {
  const modelFlags = {
    ...(has(args, 'candidate-model') ? { candidate: flagAll(args, 'candidate-model') } : {}),
    ...(flag(args, 'evaluator-model') ? { evaluator: flag(args, 'evaluator-model') } : {}),
    ...(flag(args, 'merger-model') ? { merger: flag(args, 'merger-model') } : {}),
  };
  const options: Record<string, unknown> = {
    ...(flag(args, 'sandbox') ? { sandbox: flag(args, 'sandbox') } : {}),
    ...(Object.keys(modelFlags).length > 0 ? { models: modelFlags } : {}),
  };
  // Everything that can be checked here is checked before any daemon is contacted: a bad input
  // is an input error (exit 2) whether or not a daemon runs.
  const sandbox = flag(args, 'sandbox');
  const sandboxes = optionFor(workflow, 'sandbox')?.choices ?? [];
  if (sandbox && !sandboxes.includes(sandbox)) throw usageError(`--sandbox must be one of ${sandboxes.join(', ')}`);
  const [{ toolArguments, printResult }, { followProgress, heartbeatMsOf }, { followingLine, submittedLines }, { normalizeToolInput }, { FusionClient }] = await Promise.all([
    import('./commands.js'),
    import('./progress.js'),
    import('./output/receipt.js'),
    import('../contracts/tool-input.js'),
    import('../client/index.js'),
  ]);
  const toolArgs = toolArguments(workflow, args, io);
  if (has(args, 'from-search')) {
    // Search results become sources only when the caller confirmed them (--yes) after seeing them.
    if (workflow !== 'research' || flag(args, 'input') !== undefined) throw usageError('--from-search is only for fusion research with flags (not --input)');
    const record = toolArgs as { sources?: unknown[] };
    const { searchSources } = await import('./search-command.js');
    record.sources = [...(record.sources ?? []), ...(await searchSources(args, env, io))];
  } else if (has(args, 'yes') || has(args, 'search-count')) {
    throw usageError('--yes and --search-count go with --from-search QUERY');
  }
  try {
    normalizeToolInput(workflow, toolArgs);
  } catch (err) {
    throw flag(args, 'input') === undefined ? asFlagError(err) : err;
  }
  const repo = resolvePath(flag(args, 'repo') ?? process.cwd());
  if (!isDirectory(repo)) throw usageError(`repo ${repo} is not a readable directory`);
  const body = {
    arguments: toolArgs,
    repo,
    ...(Object.keys(options).length > 0 ? { options } : {}),
  };
  const json = has(args, 'json');
  const { daemonConfigInput, resolveSocket } = await import('../config/settings.js');
  let client = new FusionClient(resolveSocket(args, env));
  let embedded: Daemon | undefined;
  if (!(await client.ping())) {
    if (!has(args, 'wait')) throw new FusionError('daemon_unavailable', `no fusion daemon answers on ${client.socketPath}; start one with 'fusion daemon', or add --wait to run this task with an embedded daemon`);
    // Zero set-up for a first run: an in-process daemon for this one task.
    const [{ buildConfig, startDaemon }, { embeddedLogger, embeddedUserNotice }] = await Promise.all([import('../main.js'), import('./embedded-log.js')]);
    const input = daemonConfigInput(args, env);
    const notice = embeddedUserNotice(process.getuid?.());
    if (notice !== undefined) io.stderr(notice);
    const config = buildConfig(input, configFieldLabel);
    // The embedded daemon is this process: its model flags are the admin's own (trusted) roster.
    embedded = await startDaemon(config, { log: embeddedLogger(input.logLevel, io.stderr), env });
    delete options.models;
    if (Object.keys(options).length === 0) delete (body as { options?: unknown }).options;
    client = new FusionClient(embedded.socketPath);
    io.stderr(`(no daemon was running: started an embedded one on ${embedded.socketPath})\n`);
  } else {
    // The egress seams configure a daemon: one already running fetches with its own, so flags it
    // lacks would be ignored in silence (every source then "not read"). Refused instead.
    const { egressResolve = [], egressAllowCidrs = [] } = daemonConfigInput(args, {});
    if (egressResolve.length > 0 || egressAllowCidrs.length > 0) {
      const { daemonSeamsMissing } = await import('../mcp/daemon-seams.js');
      const { missing, shown } = await daemonSeamsMissing(client, { resolve: egressResolve, allowCidrs: egressAllowCidrs });
      if (missing.length > 0) {
        throw usageError(`${missing.join(', ')} configure the daemon that fetches, and the daemon at ${client.socketPath} is already running ${shown ? 'without them' : '(and does not show its egress settings to this user)'}: start that daemon with the same flags, or stop it and use --wait (an embedded daemon takes them)`);
      }
    }
  }
  let onInterrupt: (() => void) | undefined;
  try {
    const receipt = await client.submit(workflow, body.arguments, body);
    if (!has(args, 'wait')) {
      io.stdout(json ? `${JSON.stringify(receipt, null, 2)}\n` : submittedLines(receipt));
      return 0;
    }
    const taskId = String(receipt.taskId);
    if (embedded !== undefined) {
      // Ctrl-C on an embedded run: stop the daemon gracefully (the task stays resumable) and say
      // what happens to the task and how to resume or cancel it. Installed before the receipt
      // line is printed: whoever reacts to that line must already reach this handler.
      const daemon = embedded;
      onInterrupt = () => void interruptEmbedded(daemon, taskId, io);
      process.once('SIGINT', onInterrupt);
    }
    io.stderr(followingLine(receipt));
    const socketPath = client.socketPath;
    const waiting = client;
    return await whileWaiting(taskId, socketPath, async () => {
      await followProgress(waiting, taskId, io, heartbeatMsOf(env));
      const result = (await waiting.callRoute('taskResult', { id: taskId })) as Record<string, unknown>;
      return await printResult(result, io, json, (sha256) => waiting.answer(taskId, sha256));
    });
  } finally {
    if (onInterrupt) process.off('SIGINT', onInterrupt);
    await embedded?.close();
  }
}

async function interruptEmbedded(daemon: Daemon, taskId: string, io: Io): Promise<void> {
  io.stderr(`\ninterrupted: stopping the embedded daemon gracefully (the task's sandboxes are stopped; it is not cancelled)\n`);
  await daemon.close().catch(() => undefined);
  io.stderr(
    `task ${taskId} was left unfinished in ${daemon.config.home}; it resumes from its last finished step when a daemon next starts there:\n` +
      `  resume:  fusion daemon --data ${daemon.config.home}   (then: fusion wait ${taskId})\n` +
      `  cancel:  start that daemon, then: fusion cancel ${taskId}\n`,
  );
  process.exit(130);
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** `fusion mcp`: an MCP stdio server for local agents; starts an embedded daemon when none answers. */
async function runMcp(args: ParsedArgs, env: Env): Promise<number> {
  const repo = resolvePath(flag(args, 'repo') ?? process.cwd());
  if (!isDirectory(repo)) throw usageError(`repo ${repo} is not a readable directory`);
  const { runMcpCommand } = await import('./mcp-command.js');
  return runMcpCommand(args, env);
}

/** Flags that may come before the command (`fusion --data DIR tasks`): the table's global rows. */
const GLOBAL_FLAGS = new Map(OPTIONS.filter((o) => o.global === true && o.flag !== undefined).map((o) => [o.flag!, o.kind !== 'bool']));

/**
 * Splits `fusion [GLOBAL FLAGS] COMMAND ARGS…`: the global flags move after the command's own
 * subcommand words and before a bare `--` (what follows `--` belongs to another program).
 */
export function splitGlobals(argv: readonly string[]): { command: string | undefined; rest: string[]; version: boolean } {
  const globals: string[] = [];
  let version = false;
  let i = 0;
  for (; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('-') || arg === '-' || arg === '--') break;
    if (arg === '--version' || arg === '-V') {
      version = true;
      continue;
    }
    if (arg === '-h') {
      globals.push('--help');
      continue;
    }
    const name = arg.slice(2).split('=')[0]!;
    const takesValue = GLOBAL_FLAGS.get(name);
    if (takesValue === undefined) {
      throw usageError(`${arg} cannot come before the command (only ${[...GLOBAL_FLAGS.keys()].map((f) => `--${f}`).join(', ')} and --version can); put it after the command`);
    }
    globals.push(arg);
    if (takesValue && !arg.includes('=')) {
      const value = argv[i + 1];
      if (value === undefined) throw usageError(`flag --${name} needs a value`);
      globals.push(value);
      i++;
    }
  }
  const command = argv[i];
  const after = argv.slice(i + 1);
  const dash = after.indexOf('--');
  const rest = dash < 0 ? [...after, ...globals] : [...after.slice(0, dash), ...globals, ...after.slice(dash)];
  return { command, rest, version };
}

export async function runCli(argv: readonly string[], env: Env, io: Io): Promise<number> {
  const { command, rest, version } = splitGlobals(argv);
  if (version) {
    io.stdout(`fusion ${packageVersion()}\n`);
    return EXIT.ok;
  }
  if (command === undefined) {
    io.stdout(HELP);
    return rest.includes('--help') ? EXIT.ok : EXIT.usage;
  }
  if (command === 'help') {
    const topic = rest.find((w) => !w.startsWith('-'));
    if (topic === undefined) io.stdout(HELP);
    else if (topic in COMMAND_HELP) io.stdout(COMMAND_HELP[topic as Command]);
    else throw usageError(`no help for unknown command ${JSON.stringify(topic)}; see 'fusion help'`);
    return EXIT.ok;
  }
  // `fusion COMMAND --help` prints that command's help and starts nothing.
  if (wantsHelp(rest)) {
    if (!(command in COMMAND_HELP)) throw usageError(`unknown command ${JSON.stringify(command)}; see 'fusion help'`);
    io.stdout(COMMAND_HELP[command as Command]);
    return EXIT.ok;
  }
  const parse = (name: Command): ParsedArgs => parseArgs(rest, flagSpecFor(name), name);
  const client = async (args: ParsedArgs): Promise<FusionClient> => new (await import('../client/index.js')).FusionClient((await import('../config/settings.js')).resolveSocket(args, env));
  const commands = async (): Promise<typeof CommandsModule> => import('./commands.js');
  // Signing keys and offline audit (before the generic `keys` handler).
  if (command === 'keys' && rest[0]?.startsWith('signing-')) return (await import('./signing-command.js')).signingKeyCommand(rest, env, io);
  switch (command) {
    case 'audit':
      return (await import('./audit-command.js')).auditCommand(rest, env, io);
    case 'daemon':
      return runDaemon(parse('daemon'), env, io);
    case 'investigate':
    case 'research':
      return submit(command, parse(command), env, io);
    case 'mcp':
      return runMcp(parse('mcp'), env);
    case 'fetch': {
      const { fetchArgsFrom, fetchCommand } = await import('./fetch-command.js');
      const fetchArgs = fetchArgsFrom(parse('fetch'));
      // The admin seams may also come from the environment, like the daemon's.
      const csv = (v: string | undefined): string[] => (v ?? '').split(',').map((x) => x.trim()).filter(Boolean);
      return fetchCommand({ ...fetchArgs, resolve: [...csv(env.FUSION_EGRESS_RESOLVE), ...fetchArgs.resolve], allowCidrs: [...csv(env.FUSION_EGRESS_ALLOW_CIDRS), ...fetchArgs.allowCidrs] }, io);
    }
    case 'search':
      return (await import('./search-command.js')).searchCommand(parse('search'), env, io);
    case 'sandbox':
      return (await import('./sandbox-command.js')).sandboxExecCommand(rest, env, io);
    case 'keys':
      return (await import('./keys-command.js')).keysCommand(rest, env, io);
    case 'models':
      return (await import('./models-command.js')).modelsCommand(rest, env, io);
    case 'validate':
      return (await commands()).validateCommand(parse('validate'), io);
    case 'completion': {
      const args = parse('completion');
      if (args.positionals.length > 1) throw usageError(`fusion completion takes one shell, got ${args.positionals.length} arguments`);
      io.stdout((await import('./completion.js')).completionScript(args.positionals[0]));
      return EXIT.ok;
    }
    case 'status': {
      const args = parse('status');
      const { printTask } = await commands();
      printTask((await (await client(args)).callRoute('task', { id: idArg(args, 'status') })) as Record<string, unknown>, io, has(args, 'json'));
      return EXIT.ok;
    }
    case 'tasks': {
      const args = parse('tasks');
      const tty = process.stdout.isTTY === true;
      const { tasksCommand } = await import('./tasks-command.js');
      return tasksCommand(args, await client(args), { ...io, tty, ...(tty ? { columns: process.stdout.columns } : {}) });
    }
    case 'logs': {
      const args = parse('logs');
      const [{ logsCommand }, { heartbeatMsOf }] = await Promise.all([import('./logs-command.js'), import('./progress.js')]);
      return logsCommand(args, idArg(args, 'logs'), await client(args), io, heartbeatMsOf(env));
    }
    case 'result': {
      const args = parse('result');
      const delivery = flag(args, 'delivery') ?? 'auto';
      const modes = optionFor('result', 'delivery')?.choices ?? [];
      if (!modes.includes(delivery)) throw usageError(`--delivery must be one of ${modes.join(', ')}`);
      const c = await client(args);
      const id = idArg(args, 'result');
      const { printResult } = await commands();
      const result = (await c.callRoute('taskResult', { id }, { query: `delivery=${delivery}` })) as Record<string, unknown>;
      return await printResult(result, io, has(args, 'json'), (sha256) => c.answer(id, sha256));
    }
    case 'wait': {
      const args = parse('wait');
      const seconds = Number(flag(args, 'timeout') ?? '600');
      if (!Number.isFinite(seconds) || seconds < 0 || seconds > MAX_WAIT_S) throw usageError(`--timeout must be a number of seconds from 0 (report the state now) to ${MAX_WAIT_S} (24 h)`);
      const waitClient = await client(args);
      const waitId = idArg(args, 'wait');
      const { printTask } = await commands();
      // The daemon's long-poll holds at most 600 s; a longer wait (a candidate may run 50 min) is
      // a chain of them up to the deadline. 0 is one poll that returns the state at once.
      const deadline = Date.now() + Math.round(seconds * 1000);
      type WaitReply = { terminal: boolean; task: Record<string, unknown>; notification: unknown; nothingRead?: boolean };
      let reply: WaitReply;
      do {
        const slice = Math.min(Math.max(deadline - Date.now(), 0), MAX_POLL_MS);
        reply = (await whileWaiting(waitId, waitClient.socketPath, () => waitClient.callRoute('taskWait', { id: waitId }, { query: `timeoutMs=${slice}` }))) as WaitReply;
      } while (!reply.terminal && Date.now() < deadline);
      if (has(args, 'json')) io.stdout(`${JSON.stringify(reply, null, 2)}\n`);
      else printTask(reply.task, io, false);
      if (!reply.terminal) {
        // Not a failure: the task runs on. A distinct code (as timeout(1)) so a script can tell.
        io.stderr(`fusion wait: timed out after ${seconds} s: ${waitId} is still ${String(reply.task.state)}; wait again with 'fusion wait ${waitId}'\n`);
        return EXIT.timedOut;
      }
      const code = endedTaskExit(String(reply.task.status), reply.nothingRead);
      if (code === EXIT.nothingRead && !has(args, 'json')) {
        io.stderr(`${waitId} completed, but read nothing: none of its ${reply.task.workflow === 'research' ? 'declared sources' : "repository's files"} could be read; 'fusion result ${waitId}' says why\n`);
      }
      return code;
    }
    case 'cancel': {
      const args = parse('cancel');
      const { printTask } = await commands();
      printTask((await (await client(args)).callRoute('taskCancel', { id: idArg(args, 'cancel') })) as Record<string, unknown>, io, has(args, 'json'));
      return EXIT.ok;
    }
    default:
      throw usageError(`unknown command ${JSON.stringify(command)}; see 'fusion help'`);
  }
}

export function exitCodeFor(err: FusionError): number {
  if (err.code === 'invalid_input') return EXIT.usage;
  if (err.code === 'daemon_unavailable' || (err.code === 'internal_error' && isConnectionLoss(err.cause))) return EXIT.noDaemon;
  return EXIT.failed;
}

/** Whether the caller asked for JSON (`--json` before any bare `--`): an error is then also JSON on stdout. */
export function wantsJson(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).includes('--json');
}

/** Reports a failed command: text on stderr, and with --json an error object on stdout that CI can read. */
export function reportError(err: unknown, argv: readonly string[], io: Io): number {
  const fe = cliErrorOf(err);
  io.stderr(`fusion: ${fe.code}: ${fe.message}\n`);
  if (wantsJson(argv)) io.stdout(`${JSON.stringify({ error: { code: fe.code, message: fe.message } })}\n`);
  return exitCodeFor(fe);
}

// Run when executed as the bin (not when imported by tests).
const invokedDirectly = process.argv[1] !== undefined && import.meta.url === new URL(`file://${realpathSync(process.argv[1])}`).href;
if (invokedDirectly) {
  const io = processIo();
  quietOnEpipe(process.stdout);
  quietOnEpipe(process.stderr);
  runCli(process.argv.slice(2), process.env, io).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.exitCode = reportError(err, process.argv.slice(2), io);
    },
  );
}
