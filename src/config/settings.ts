/**
 * Resolves the data directory, socket and daemon settings from flags and the environment.
 * Precedence: flag > environment > default. `FUSION_HOME` defaults to
 * `$XDG_STATE_HOME/fusion` or `~/.local/state/fusion`.
 *
 * Sockets: a daemon's default is `$FUSION_HOME/fusion.sock`, or SHARED_SOCKET with
 * --socket-group (the data directory stays 0700, so a shared socket lives elsewhere). A client
 * without --socket/FUSION_SOCKET uses its own home's socket, or SHARED_SOCKET when only that one
 * exists: a local agent account finds the shared daemon with no settings. A client given a data
 * directory (--data, FUSION_HOME) uses that directory's daemon only: the socket its live owner
 * recorded in `daemon.json` (a --socket-group daemon listens outside its data directory), else the
 * directory's own socket.
 */
import { lstatSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import type { DaemonConfigInput } from '../contracts/config.js';
import { ownerSocketOf } from '../store/data-dir-record.js';
import { dataPaths } from '../tasks/paths.js';
import { z } from 'zod';
import { FusionError } from '../errors.js';
import { flag, flagAll, has, type ParsedArgs } from './args.js';
import { optionLabel, optionsOf, type OptionDef } from './options.js';

export type Env = Record<string, string | undefined>;

export function resolveHome(args: ParsedArgs, env: Env): string {
  const explicit = flag(args, 'data') ?? env.FUSION_HOME;
  if (explicit) return resolve(explicit);
  const state = env.XDG_STATE_HOME && env.XDG_STATE_HOME.trim() !== '' ? env.XDG_STATE_HOME : join(homedir(), '.local', 'state');
  return join(state, 'fusion');
}

/** The default socket of a daemon started with --socket-group (docs/operations.md#agent-accounts). */
export const SHARED_SOCKET = '/run/fusion/fusion.sock';

/** What is at `path`: a socket, nothing, or something this user may not look at (EACCES on a directory above it). */
function socketAt(path: string): 'socket' | 'none' | 'denied' {
  try {
    return lstatSync(path).isSocket() ? 'socket' : 'none';
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'EACCES' || code === 'EPERM' ? 'denied' : 'none';
  }
}

/**
 * The socket a client talks to (`shared`: SHARED_SOCKET, a parameter for tests). An explicit
 * data directory (--data, FUSION_HOME) means that directory's daemon or none: another data
 * directory's shared daemon would be handed this caller's repository and URLs. That daemon's
 * socket is the one its owner record names (only a record root or this user wrote, of a live pid:
 * store/data-dir-record.ts), else the directory's default socket. Without one,
 * the shared socket is used when the home has none and the shared one exists, or exists behind
 * a directory this user may not enter (connecting then says which group admits it, rather than
 * "no daemon" and an embedded daemon started as this user).
 */
export function resolveSocket(args: ParsedArgs, env: Env, shared: string = SHARED_SOCKET): string {
  const explicit = flag(args, 'socket') ?? env.FUSION_SOCKET;
  if (explicit) return resolve(explicit);
  const own = dataPaths(resolveHome(args, env)).defaultSocket;
  if (flag(args, 'data') || env.FUSION_HOME) return ownerSocketOf(resolveHome(args, env), process.getuid?.() ?? -1) ?? own;
  if (socketAt(own) === 'socket') return own;
  return socketAt(shared) === 'none' ? own : shared;
}

/** The socket a daemon listens on (never discovered: a daemon does not take over another's path). */
export function resolveDaemonSocket(args: ParsedArgs, env: Env): string {
  const explicit = flag(args, 'socket') ?? env.FUSION_SOCKET;
  if (explicit) return resolve(explicit);
  return socketGroupOf(args, env) !== undefined ? SHARED_SOCKET : dataPaths(resolveHome(args, env)).defaultSocket;
}

function socketGroupOf(args: ParsedArgs, env: Env): string | undefined {
  const group = flag(args, 'socket-group') ?? env.FUSION_SOCKET_GROUP;
  return group !== undefined && group.trim() !== '' ? group.trim() : undefined;
}

/** A comma-separated environment value as a list (blank items dropped). */
export function csv(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

const WHOLE = z.string().regex(/^\d{1,15}$/u);
const SWITCH = z.enum(['1', '0', 'true', 'false', 'yes', 'no']);

function badValue(o: OptionDef, source: string, raw: string, what: string): FusionError {
  const value = o.kind === 'choice' ? o.choices![0]! : (o.metavar ?? (o.kind === 'int' ? 'N' : 'VALUE'));
  const example = source.startsWith('--') ? `${source} ${value}` : `${source}=${value}`;
  return new FusionError('invalid_config', `${source} must be ${what}, got ${JSON.stringify(raw)}; fix it (e.g. ${example}) or leave it unset for the default${o.default !== undefined ? ` (${o.default})` : ''}`, {
    details: { option: optionLabel(o) },
  });
}

/**
 * One option's value from the flag, else its environment variable (flag > environment; a blank
 * value counts as unset), checked against its kind. Lists add the variable's items and every flag.
 * A bad value is an `invalid_config` naming the flag or variable it came from and the fix.
 */
export function optionValue(o: OptionDef, args: ParsedArgs, env: Env): string | number | boolean | string[] | undefined {
  if (o.kind === 'list') return [...csv(o.env === undefined ? undefined : env[o.env]), ...(o.flag === undefined ? [] : flagAll(args, o.flag))];
  if (o.kind === 'bool') {
    if (o.flag !== undefined && has(args, o.flag)) return true;
    const raw = o.env === undefined ? undefined : env[o.env]?.trim();
    if (raw === undefined || raw === '') return undefined;
    const parsed = SWITCH.safeParse(raw.toLowerCase());
    if (!parsed.success) throw badValue(o, o.env!, raw, '1 (on) or 0 (off)');
    return ['1', 'true', 'yes'].includes(parsed.data);
  }
  const fromFlag = o.flag === undefined ? undefined : flag(args, o.flag);
  const source = fromFlag !== undefined ? `--${o.flag!}` : o.env;
  const raw = (fromFlag ?? (o.env === undefined ? undefined : env[o.env]))?.trim();
  if (raw === undefined || raw === '' || source === undefined) return undefined;
  if (o.kind === 'int') {
    if (!WHOLE.safeParse(raw).success) throw badValue(o, source, raw, 'a whole number');
    return Number(raw) * (o.scale ?? 1);
  }
  if (o.kind === 'choice') {
    const parsed = z.enum(o.choices as [string, ...string[]]).safeParse(raw);
    if (!parsed.success) throw badValue(o, source, raw, `one of ${o.choices!.join(', ')}`);
    return parsed.data;
  }
  return o.path === true ? resolve(raw) : raw;
}

/**
 * The daemon's settings, generated from the options table: every row with a daemon setting
 * (`key`), read flag > environment; the data directory and socket resolved as above. The schema
 * in contracts/config.ts checks ranges and fills defaults (buildConfig).
 */
export function daemonConfigInput(args: ParsedArgs, env: Env): DaemonConfigInput {
  const input: Record<string, unknown> = {
    home: resolveHome(args, env),
    socketPath: resolveDaemonSocket(args, env),
  };
  for (const o of optionsOf('daemon')) {
    if (o.key === undefined) continue;
    const value = optionValue(o, args, env);
    if (value !== undefined) input[o.key] = value;
  }
  return input as DaemonConfigInput;
}

/** The process environment, for library callers that pass none (only cli/ and main.ts read it). */
export function processEnv(): Env {
  return process.env;
}
