/**
 * `fusion models check [--models-file F] [--candidate-model S …] [--evaluator-model S]
 * [--merger-model S] [--timeout SECONDS] [--json]`
 *
 * Loads the roster exactly as the daemon would (models file or FUSION_MODELS_FILE, else the
 * builtin engine), applies the flags as admin-trusted overrides, sends each distinct model one
 * tiny tool-offering request and reports reachability, latency and tool-call support.
 * Exit codes: 0 all usable, 1 a model is unreachable or a candidate model made no tool call,
 * 2 usage or a bad model spec; configuration errors propagate (invalid_config, exit 1).
 */
import { MODELS_HELP } from './help.js';
import { createLogger, type Logger } from '../log.js';
import { checkModels, formatCheckReport } from '../models/models-check.js';
import { loadRoster, type RosterOverrides } from '../models/roster-config.js';
import { flag, flagAll, has, parseArgs, usageError, type FlagSpec } from '../config/args.js';
import { flagSpecFor } from '../config/options.js';

const CHECK_FLAGS: Record<string, FlagSpec> = flagSpecFor('models');

export interface ModelsIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

function stderrLogger(env: Record<string, string | undefined>, io: ModelsIo): Logger {
  const level = env.FUSION_LOG_LEVEL && env.FUSION_LOG_LEVEL.trim() !== '' ? env.FUSION_LOG_LEVEL : 'warn';
  return createLogger({ level, destination: { write: (line: string) => io.stderr(line) } });
}

/** `argv` is what follows `fusion models`. */
export async function modelsCommand(argv: readonly string[], env: Record<string, string | undefined>, io: ModelsIo): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === 'help' || sub === '--help' || sub === '-h') {
    io.stdout(MODELS_HELP);
    return sub === undefined ? 2 : 0;
  }
  if (sub !== 'check') throw usageError(`unknown models command ${JSON.stringify(sub)}; see 'fusion models help'`);
  const args = parseArgs(rest, CHECK_FLAGS);
  if (has(args, 'help')) {
    io.stdout(MODELS_HELP);
    return 0;
  }
  if (args.positionals.length > 0) throw usageError(`models check takes no positional arguments (got ${JSON.stringify(args.positionals[0])})`);
  const candidates = flagAll(args, 'candidate-model');
  if (candidates.length !== 0 && candidates.length !== 1 && candidates.length !== 3) {
    throw usageError(`--candidate-model must be given once (self-fusion) or three times, got ${candidates.length}`);
  }
  const timeoutText = flag(args, 'timeout');
  const seconds = timeoutText === undefined ? 60 : Number(timeoutText);
  if (!Number.isFinite(seconds) || seconds <= 0) throw usageError('--timeout must be a positive number of seconds');

  const overrides: RosterOverrides = {
    ...(candidates.length > 0 ? { candidate: candidates } : {}),
    ...(flag(args, 'evaluator-model') ? { evaluator: flag(args, 'evaluator-model')! } : {}),
    ...(flag(args, 'merger-model') ? { merger: flag(args, 'merger-model')! } : {}),
  };
  const modelsFile = flag(args, 'models-file');
  const loaded = loadRoster({
    ...(modelsFile === undefined ? {} : { file: modelsFile }),
    env,
    overrides,
    // The admin's own flags, like the models file: any endpoint, keys from the environment.
    trustOverrides: true,
    log: stderrLogger(env, io),
  });
  const report = await checkModels(loaded.roster, loaded.describe(), { timeoutMs: Math.round(seconds * 1000) });
  io.stdout(has(args, 'json') ? `${JSON.stringify(report, null, 2)}\n` : formatCheckReport(report));
  return report.ok ? 0 : 1;
}
