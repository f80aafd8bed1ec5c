#!/usr/bin/env node
/**
 * `fusion` CLI entry. Reads the environment, parses flags, dispatches to a command, maps errors
 * to exit codes (0 ok, 1 failure, 2 invalid input/usage, 3 no daemon, 4 other fetch failure).
 */
import { readFileSync } from 'node:fs';
import { FusionError } from '../errors.js';
import { createLogger } from '../log.js';
import type { Workflow } from '../contracts/constants.js';
import { SANDBOX_CHOICES } from '../contracts/task-options.js';
import { DELIVERY_MODES } from '../contracts/api.js';
import { buildConfig, startDaemon, type Daemon, type ShutdownReport } from '../main.js';
import { runMcpCommand } from './mcp-command.js';
import { modelsCommand } from './models-command.js';
import { fetchArgsFrom, fetchCommand, FETCH_FLAGS } from './fetch-command.js';
import { sandboxExecCommand } from './sandbox-command.js';
import { searchCommand, searchSources, SEARCH_FLAGS } from './search-command.js';
import { signingKeyCommand } from './signing-command.js';
import { auditCommand } from './audit-command.js';
import { keysCommand } from './keys-command.js';
import { resolve as resolvePath } from 'node:path';
import { parseArgs, flag, flagAll, has, usageError, type FlagSpec, type ParsedArgs } from '../config/args.js';
import { daemonConfigInput, resolveSocket, type Env } from '../config/settings.js';
import { FusionClient } from '../client/index.js';
import { followProgress, printResult, printTask, toolArguments, validateCommand, type Io } from './commands.js';
import { COMMAND_HELP, HELP, wantsHelp } from './help.js';
import { normalizeToolInput } from '../contracts/tool-input.js';
import { cliErrorOf, isConnectionLoss, quietOnEpipe, whileWaiting } from './daemon-gone.js';
import { isTaskState } from '../contracts/task-state.js';
import { statSync } from 'node:fs';

const COMMON: Record<string, FlagSpec> = { socket: { value: true }, data: { value: true }, json: {}, help: {} };
const DAEMON_FLAGS: Record<string, FlagSpec> = {
  ...COMMON,
  sandbox: { value: true },
  'log-level': { value: true },
  concurrency: { value: true },
  'max-queued': { value: true },
  'max-queued-per-caller': { value: true },
  'storage-reserve-mb': { value: true },
  'keep-attempt-files': {},
  'socket-group': { value: true },
  resolve: { value: true, repeat: true },
  'allow-cidr': { value: true, repeat: true },
  'models-file': { value: true },
  'candidate-model': { value: true, repeat: true },
  'evaluator-model': { value: true },
  'merger-model': { value: true },
  listen: { value: true },
  'listen-public': {},
  'sandbox-rlimit-fallback': {},
  'research-store': { value: true },
  'research-db': { value: true },
  'database-url': { value: true },
  'research-user-agent': { value: true },
  'research-queue-prefix': { value: true },
};
const SUBMIT_FLAGS: Record<string, FlagSpec> = {
  ...DAEMON_FLAGS,
  objective: { value: true },
  background: { value: true, repeat: true },
  deliverable: { value: true },
  scope: { value: true, repeat: true },
  constraint: { value: true, repeat: true },
  source: { value: true, repeat: true },
  purpose: { value: true, repeat: true },
  input: { value: true },
  repo: { value: true },
  wait: {},
  'from-search': { value: true },
  'search-count': { value: true },
  yes: {},
};


function processIo(): Io {
  return {
    stdout: (t) => void process.stdout.write(t),
    stderr: (t) => void process.stderr.write(t),
    readStdin: () => readFileSync(0, 'utf8'),
  };
}

/** Task ids are `<workflow>-<32 hex>`: anything else is an input error before any daemon is asked. */
const TASK_ID = /^(?:investigate|research)-[0-9a-f]{32}$/u;

function idArg(args: ParsedArgs, command: string): string {
  const id = args.positionals[0];
  if (!id) throw usageError(`${command} needs a task id`);
  if (!TASK_ID.test(id)) throw usageError(`${JSON.stringify(id)} is not a task id (expected investigate-… or research-… followed by 32 hex digits)`);
  if (args.positionals.length > 1) throw usageError(`${command} takes one task id, got ${args.positionals.length} arguments`);
  return encodeURIComponent(id);
}

async function runDaemon(args: ParsedArgs, env: Env, io: Io): Promise<number> {
  const config = buildConfig(daemonConfigInput(args, env));
  const daemon = await startDaemon(config, { env });
  io.stderr(`fusion daemon listening on ${daemon.socketPath} (data ${config.home})\n`);
  if (daemon.tcp) io.stderr(`research API listening on http://${daemon.tcp.host.includes(':') ? `[${daemon.tcp.host}]` : daemon.tcp.host}:${daemon.tcp.port}\n`);
  if (config.researchStore === 'memory') io.stderr('warning: --research-store memory: research runs are lost when this daemon stops\n');
  const report = await new Promise<ShutdownReport>((resolve) => {
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
  if (report.exitCode !== 0) {
    io.stderr(`fusion daemon: shutdown deadline (${config.shutdownTimeoutS} s) passed while ${report.stuckAt ?? 'stopping'}; abandoned ${report.abandonedTasks.length} task run(s) and ${report.abandonedResearchRuns} research run(s), which resume later\n`);
    // Whatever still holds the event loop (a connection that never answers) must not keep it.
    process.exit(report.exitCode);
  }
  return 0;
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
  if (sandbox && !(SANDBOX_CHOICES as readonly string[]).includes(sandbox)) throw usageError(`--sandbox must be one of ${SANDBOX_CHOICES.join(', ')}`);
  const toolArgs = toolArguments(workflow, args, io);
  if (has(args, 'from-search')) {
    // Search results become sources only when the caller confirmed them (--yes) after seeing them.
    if (workflow !== 'research' || flag(args, 'input') !== undefined) throw usageError('--from-search is only for fusion research with flags (not --input)');
    const record = toolArgs as { sources?: unknown[] };
    record.sources = [...(record.sources ?? []), ...(await searchSources(args, env, io))];
  } else if (has(args, 'yes') || has(args, 'search-count')) {
    throw usageError('--yes and --search-count go with --from-search QUERY');
  }
  normalizeToolInput(workflow, toolArgs);
  const repo = resolvePath(flag(args, 'repo') ?? process.cwd());
  if (!isDirectory(repo)) throw usageError(`repo ${repo} is not a readable directory`);
  const body = {
    arguments: toolArgs,
    repo,
    ...(Object.keys(options).length > 0 ? { options } : {}),
  };
  const json = has(args, 'json');
  let client = new FusionClient(resolveSocket(args, env));
  let embedded: Daemon | undefined;
  if (!(await client.ping())) {
    if (!has(args, 'wait')) throw new FusionError('daemon_unavailable', `no fusion daemon answers on ${client.socketPath}; start one with 'fusion daemon', or add --wait to run this task with an embedded daemon`);
    // Zero set-up for a first run: an in-process daemon for this one task.
    const config = buildConfig({ ...daemonConfigInput(args, env), logLevel: (env.FUSION_LOG_LEVEL as 'warn' | undefined) ?? 'warn' });
    // The embedded daemon is this process: its model flags are the admin's own (trusted) roster.
    embedded = await startDaemon(config, { log: createLogger({ level: config.logLevel }), env });
    delete options.models;
    if (Object.keys(options).length === 0) delete (body as { options?: unknown }).options;
    client = new FusionClient(embedded.socketPath);
    io.stderr(`(no daemon was running: started an embedded one on ${embedded.socketPath})\n`);
  }
  let onInterrupt: (() => void) | undefined;
  try {
    const receipt = await client.submit(workflow, body.arguments, body);
    if (!has(args, 'wait')) {
      io.stdout(json ? `${JSON.stringify(receipt, null, 2)}\n` : `${String(receipt.text)}\n`);
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
    io.stderr(`${String(receipt.text).split('\n')[0]}\n`);
    const socketPath = client.socketPath;
    const waiting = client;
    return await whileWaiting(taskId, socketPath, async () => {
      await followProgress(waiting, taskId, io);
      const result = (await waiting.call('GET', `/v1/tasks/${encodeURIComponent(taskId)}/result`)) as Record<string, unknown>;
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
  return runMcpCommand(args, env);
}

export async function runCli(argv: readonly string[], env: Env, io: Io): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h') {
    io.stdout(HELP);
    return command === undefined ? 2 : 0;
  }
  if (command === 'help') {
    const topic = rest[0];
    if (topic === undefined) io.stdout(HELP);
    else if (COMMAND_HELP[topic] !== undefined) io.stdout(COMMAND_HELP[topic]);
    else throw usageError(`no help for unknown command ${JSON.stringify(topic)}; see 'fusion help'`);
    return 0;
  }
  // `fusion COMMAND --help` prints that command's help and starts nothing.
  if (wantsHelp(rest)) {
    const text = COMMAND_HELP[command];
    if (text === undefined) throw usageError(`unknown command ${JSON.stringify(command)}; see 'fusion help'`);
    io.stdout(text);
    return 0;
  }
  const client = (args: ParsedArgs): FusionClient => new FusionClient(resolveSocket(args, env));
  // Signing keys and offline audit (before the generic `keys` handler).
  if (command === 'keys' && rest[0]?.startsWith('signing-')) return signingKeyCommand(rest, env, io);
  if (command === 'audit') return auditCommand(rest, env, io);
  switch (command) {
    case 'daemon':
      return runDaemon(parseArgs(rest, DAEMON_FLAGS), env, io);
    case 'investigate':
    case 'research':
      return submit(command, parseArgs(rest, SUBMIT_FLAGS), env, io);
    case 'mcp':
      return runMcp(parseArgs(rest, { ...DAEMON_FLAGS, repo: { value: true }, root: { value: true, repeat: true } }), env);
    case 'fetch': {
      const args = parseArgs(rest, FETCH_FLAGS);
      const fetchArgs = fetchArgsFrom(args);
      // The admin seams may also come from the environment, like the daemon's.
      const csv = (v: string | undefined): string[] => (v ?? '').split(',').map((x) => x.trim()).filter(Boolean);
      return fetchCommand({ ...fetchArgs, resolve: [...csv(env.FUSION_EGRESS_RESOLVE), ...fetchArgs.resolve], allowCidrs: [...csv(env.FUSION_EGRESS_ALLOW_CIDRS), ...fetchArgs.allowCidrs] }, io);
    }
    case 'search':
      return searchCommand(parseArgs(rest, SEARCH_FLAGS), env, io);
    case 'sandbox':
      return sandboxExecCommand(rest, env, io);
    case 'keys':
      return keysCommand(rest, env, io);
    case 'models':
      return modelsCommand(rest, env, io);
    case 'validate':
      return validateCommand(parseArgs(rest, { help: {} }), io);
    case 'status': {
      const args = parseArgs(rest, COMMON);
      printTask((await client(args).call('GET', `/v1/tasks/${idArg(args, 'status')}`)) as Record<string, unknown>, io, has(args, 'json'));
      return 0;
    }
    case 'tasks': {
      const args = parseArgs(rest, { ...COMMON, state: { value: true }, limit: { value: true } });
      const q = new URLSearchParams();
      const state = flag(args, 'state');
      const limit = flag(args, 'limit');
      if (state !== undefined && !isTaskState(state)) throw usageError(`state must be a task state, got ${JSON.stringify(state)}`);
      if (limit !== undefined && !/^\d+$/u.test(limit)) throw usageError(`--limit must be a whole number from 1 to 1000, got ${JSON.stringify(limit)}`);
      if (state !== undefined) q.set('state', state);
      if (limit !== undefined) q.set('limit', limit);
      const reply = (await client(args).call('GET', `/v1/tasks?${q.toString()}`)) as { tasks: Array<Record<string, unknown>>; truncated?: boolean; limit?: number };
      if (has(args, 'json')) io.stdout(`${JSON.stringify(reply, null, 2)}\n`);
      else for (const t of reply.tasks) printTask(t, io, false);
      // A cut list says so, and how to see more (on stderr: stdout stays the list).
      if (reply.truncated === true) {
        io.stderr(`(showing the newest ${reply.tasks.length} tasks; more exist: raise --limit (up to 1000) or narrow with --state STATE)\n`);
      }
      return 0;
    }
    case 'result': {
      const args = parseArgs(rest, { ...COMMON, delivery: { value: true } });
      const delivery = flag(args, 'delivery') ?? 'auto';
      if (!(DELIVERY_MODES as readonly string[]).includes(delivery)) throw usageError(`--delivery must be one of ${DELIVERY_MODES.join(', ')}`);
      const c = client(args);
      const id = idArg(args, 'result');
      const result = (await c.call('GET', `/v1/tasks/${id}/result?delivery=${delivery}`)) as Record<string, unknown>;
      return await printResult(result, io, has(args, 'json'), (sha256) => c.answer(decodeURIComponent(id), sha256));
    }
    case 'wait': {
      const args = parseArgs(rest, { ...COMMON, timeout: { value: true } });
      const seconds = Number(flag(args, 'timeout') ?? '600');
      if (!Number.isFinite(seconds) || seconds < 0 || seconds > 600) throw usageError('--timeout must be a number of seconds from 0 to 600');
      const waitClient = client(args);
      const waitId = idArg(args, 'wait');
      const reply = (await whileWaiting(waitId, waitClient.socketPath, () => waitClient.call('GET', `/v1/tasks/${waitId}/wait?timeoutMs=${Math.round(seconds * 1000)}`))) as { terminal: boolean; task: Record<string, unknown>; notification: unknown };
      if (has(args, 'json')) io.stdout(`${JSON.stringify(reply, null, 2)}\n`);
      else printTask(reply.task, io, false);
      if (!reply.terminal) return 1;
      return reply.task.status === 'completed' ? 0 : 1;
    }
    case 'cancel': {
      const args = parseArgs(rest, COMMON);
      printTask((await client(args).call('POST', `/v1/tasks/${idArg(args, 'cancel')}/cancel`)) as Record<string, unknown>, io, has(args, 'json'));
      return 0;
    }
    default:
      throw usageError(`unknown command ${JSON.stringify(command)}; see 'fusion help'`);
  }
}

export function exitCodeFor(err: FusionError): number {
  if (err.code === 'invalid_input') return 2;
  if (err.code === 'daemon_unavailable' || (err.code === 'internal_error' && isConnectionLoss(err.cause))) return 3;
  return 1;
}

// Run when executed as the bin (not when imported by tests).
const invokedDirectly = process.argv[1] !== undefined && import.meta.url === new URL(`file://${(await import('node:fs')).realpathSync(process.argv[1])}`).href;
if (invokedDirectly) {
  const io = processIo();
  quietOnEpipe(process.stdout);
  quietOnEpipe(process.stderr);
  runCli(process.argv.slice(2), process.env, io).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      const fe = cliErrorOf(err);
      io.stderr(`fusion: ${fe.code}: ${fe.message}\n`);
      process.exitCode = exitCodeFor(fe);
    },
  );
}
