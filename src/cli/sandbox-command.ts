/**
 * `fusion sandbox exec [--backend auto|bwrap|docker] [--repo DIR] [--out DIR] -- CMD ARGS…`
 *
 * Runs one command under exactly the candidate policy (the same launcher construction, limits,
 * environment and binds as a candidate attempt, minus the broker socket and the request): /repo
 * read-only, /out writable, the built child code at /opt/fusion, no network. Streams the
 * command's output and exits with its exit code, so an admin can see precisely what a candidate
 * can and cannot do on this machine (`fusion sandbox exec -- node -e "…"`).
 *
 * Exit codes: the command's own; 128+N when it died of signal N; 124 on a wall or idle timeout;
 * 125 when its output exceeded the cap; 130 when interrupted (SIGINT/SIGTERM); 2 usage errors.
 *
 * `createLauncherFactories` is how the daemon builds its launchers too (src/main.ts), so this
 * command and the daemon can never disagree about the policy.
 */
import { SANDBOX_HELP } from './help.js';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { constants as osConstants, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { fileURLToPath } from 'node:url';
import { createLogger } from '../log.js';
import { DEFAULT_SANDBOX_LIMITS, type LauncherName, type SandboxExit, type SandboxLimits } from '../launcher/port.js';
import { selectLauncher } from '../launcher/select.js';
import { createLauncherFactories } from '../launcher/factories.js';
import { createUidPool, parseUidRange } from '../launcher/uid-pool.js';
import { CANDIDATE_ENV } from '../launcher/port.js';
import { flag, has, parseArgs, usageError, type FlagSpec } from '../config/args.js';
import { flagSpecFor } from '../config/options.js';
import type { Env } from '../config/settings.js';
import type { Io } from './commands.js';

/** Containers of `sandbox exec` carry this owner, so a daemon's start-up reaping leaves them alone. */
export const SANDBOX_EXEC_OWNER = 'sandbox-exec';

const FLAGS: Record<string, FlagSpec> = flagSpecFor('sandbox');
const CHOICES = ['auto', 'bwrap', 'docker', 'gvisor'] as const;

/** The built tree bound at /opt/fusion (dist/ when running compiled), when it holds the child. */
function childCodeDir(): string | undefined {
  const dir = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
  return existsSync(join(dir, 'sandbox', 'child-main.js')) ? dir : undefined;
}

function exitCodeOf(exit: SandboxExit): number {
  // /out over its caps is 125 whatever the command did afterwards (it may exit 0 after its write
  // was refused at the cap).
  if (exit.outDirOverflow !== undefined) return 125;
  switch (exit.reason) {
    case 'exited':
      return exit.exitCode ?? 1;
    case 'signaled': {
      const number = exit.signal === null ? undefined : (osConstants.signals as Record<string, number>)[exit.signal];
      return number === undefined ? (exit.exitCode ?? 1) : 128 + number;
    }
    case 'wall_timeout':
    case 'idle_timeout':
      return 124;
    case 'output_cap':
      return 125;
    case 'aborted':
      return 130;
  }
}

/** `argv` is everything after `fusion sandbox`: `exec [flags] -- CMD ARGS…`. */
export async function sandboxExecCommand(argv: string[], env: Env, io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === 'help' || sub === '--help' || sub === '-h') {
    io.stdout(SANDBOX_HELP);
    return sub === undefined ? 2 : 0;
  }
  if (sub !== 'exec') throw usageError(`unknown sandbox subcommand ${JSON.stringify(sub)}; see 'fusion sandbox --help'`);
  const args = parseArgs(rest, FLAGS);
  if (has(args, 'help')) {
    io.stdout(SANDBOX_HELP);
    return 0;
  }
  if (args.positionals.length > 0) throw usageError(`unexpected argument ${JSON.stringify(args.positionals[0])}: put the command after --`);
  const command = args.rest;
  if (command.length === 0 || command[0] === '') throw usageError('sandbox exec needs a command after --, e.g. fusion sandbox exec -- node -e "console.log(1)"');
  const backend = flag(args, 'backend') ?? env.FUSION_SANDBOX ?? 'auto';
  if (!(CHOICES as readonly string[]).includes(backend)) throw usageError(`--backend must be one of ${CHOICES.join(', ')}`);
  const repoDir = resolve(flag(args, 'repo') ?? process.cwd());
  if (!(await stat(repoDir).then((s) => s.isDirectory(), () => false))) throw usageError(`--repo ${repoDir} is not a directory`);

  const log = createLogger({ level: flag(args, 'log-level') ?? env.FUSION_LOG_LEVEL ?? 'warn' });
  const uidRange = flag(args, 'sandbox-uids') ?? env.FUSION_SANDBOX_UIDS;
  const factories = createLauncherFactories({
    log,
    ...(uidRange === undefined ? {} : { uidPool: createUidPool({ range: parseUidRange(uidRange) }) }),
    ...(env.DOCKER_HOST?.startsWith('unix://') ? { dockerSocketPath: env.DOCKER_HOST.slice('unix://'.length) } : {}),
    dockerOwner: SANDBOX_EXEC_OWNER,
    allowRlimitFallback: env.FUSION_SANDBOX_RLIMIT === '1',
  });
  const launcher = await selectLauncher(backend as 'auto' | LauncherName, factories);

  const keepOut = flag(args, 'out');
  const outDir = keepOut !== undefined ? resolve(keepOut) : await mkdtemp(join(tmpdir(), 'fusion-sandbox-exec-'));
  if (keepOut !== undefined && !(await stat(outDir).then((s) => s.isDirectory(), () => false))) throw usageError(`--out ${outDir} is not a directory`);

  const controller = new AbortController();
  const stop = (): void => controller.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
  try {
    const codeDir = childCodeDir();
    const limits: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS };
    const handle = await launcher.launch({
      taskId: 'sandbox-exec',
      label: `exec-${process.pid}`,
      repoDir,
      outDir,
      ...(codeDir === undefined ? {} : { codeDir }),
      command,
      env: { ...CANDIDATE_ENV },
      limits,
      signal: controller.signal,
      onStdout: (chunk) => io.stdout(decoders.stdout.write(chunk)),
      onStderr: (chunk) => io.stderr(decoders.stderr.write(chunk)),
    });
    const exit = await handle.exit;
    io.stdout(decoders.stdout.end());
    io.stderr(decoders.stderr.end());
    if (exit.reason !== 'exited' && exit.reason !== 'signaled') {
      io.stderr(`fusion sandbox: ${launcher.name} sandbox stopped: ${exit.reason} after ${exit.durationMs} ms\n`);
    }
    if (exit.outDirOverflow !== undefined) io.stderr(`fusion sandbox: /out over its cap: ${exit.outDirOverflow}\n`);
    return exitCodeOf(exit);
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    if (keepOut === undefined) await rm(outDir, { recursive: true, force: true });
  }
}
