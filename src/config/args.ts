/**
 * A small, strict argv parser: every flag is declared (the flag sets come from the options table,
 * options.ts); an unknown flag or a missing value is a usage error naming the flag. (No
 * dependency: the CLI must start fast and fail clearly.)
 */
import { FusionError } from '../errors.js';

export interface FlagSpec {
  /** Takes a value (`--x V` or `--x=V`); otherwise boolean. */
  value?: boolean;
  /** May be given more than once (values collected in order). */
  repeat?: boolean;
}

export interface ParsedArgs {
  flags: Map<string, string[]>;
  positionals: string[];
  /** Everything after a bare `--`. */
  rest: string[];
  /** Every flag with its value, in command-line order (pairs such as --source/--purpose need it). */
  order: Array<[string, string]>;
}

export function usageError(message: string): FusionError {
  return new FusionError('invalid_input', message, { details: { usage: true } });
}

/** `command` (when given) names the command in the unknown-flag message and where its flags are listed. */
export function parseArgs(argv: readonly string[], spec: Record<string, FlagSpec>, command?: string): ParsedArgs {
  const flags = new Map<string, string[]>();
  const positionals: string[] = [];
  let rest: string[] = [];
  const order: Array<[string, string]> = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      rest = argv.slice(i + 1);
      break;
    }
    if (!arg.startsWith('--') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const def = spec[name];
    if (!def) throw usageError(command === undefined ? `unknown flag --${name}; see 'fusion help'` : `unknown flag --${name} for fusion ${command}; its flags are listed by 'fusion ${command} --help'`);
    let value = 'true';
    if (def.value) {
      if (eq >= 0) value = arg.slice(eq + 1);
      else {
        const next = argv[i + 1];
        if (next === undefined) throw usageError(`flag --${name} needs a value`);
        value = next;
        i++;
      }
    } else if (eq >= 0) throw usageError(`flag --${name} takes no value`);
    const list = flags.get(name) ?? [];
    if (list.length > 0 && !def.repeat) throw usageError(`flag --${name} may be given only once`);
    list.push(value);
    flags.set(name, list);
    order.push([name, value]);
  }
  return { flags, positionals, rest, order };
}

export function flag(args: ParsedArgs, name: string): string | undefined {
  return args.flags.get(name)?.[0];
}

export function flagAll(args: ParsedArgs, name: string): string[] {
  return args.flags.get(name) ?? [];
}

export function has(args: ParsedArgs, name: string): boolean {
  return args.flags.has(name);
}
