/**
 * Provider API keys. A key comes from an environment variable (passed in, never read from
 * `process.env` here) or from a key file that only its owner can read (mode 0600 or stricter).
 *
 * Security decisions:
 * - The key lives only in a closure. A `Credential` object has no property holding it, and its
 *   `toJSON`/`inspect` show where the key came from, never the key, so a provider or roster
 *   that ends up in a log line, an error's details or `JSON.stringify` cannot leak it.
 * - A key file readable by group or others is refused (fatal at load) rather than used: the
 *   admin is told the exact `chmod 600` to run.
 * - A key containing whitespace is refused: it is either a multi-line file by mistake or an
 *   attempt to smuggle a header line.
 */
import { readFileSync, statSync } from 'node:fs';
import { inspect } from 'node:util';
import { FusionError } from '../errors.js';
import { redactSecrets } from '../contracts/secret-redaction.js';

export interface Credential {
  /** `env OPENAI_API_KEY` or `file /etc/fusion/openai.key`; safe to log. */
  readonly source: string;
  /** Runs `fn` with the key; the only way to reach it. */
  use<T>(fn: (key: string) => T): T;
  /** Removes the key (and anything key-shaped) from text that came back from upstream. */
  redact(text: string): string;
  toJSON(): { credential: string };
}

/** Redacts `key` itself and, for long keys, any 12+ character run of it (partial echoes). */
export function redactKey(text: string, key: string): string {
  if (key === '') return text;
  let out = text.split(key).join('[redacted]');
  if (key.length >= 16) {
    // Upstreams echo masked keys ("sk-proj-abcd****wxyz"): remove long fragments too.
    for (const part of [key.slice(0, 12), key.slice(-12)]) out = out.split(part).join('[redacted]');
  }
  return redactSecrets(out);
}

function makeCredential(key: string, source: string): Credential {
  const credential: Credential = {
    source,
    use: (fn) => fn(key),
    redact: (text) => redactKey(text, key),
    toJSON: () => ({ credential: source }),
  };
  Object.defineProperty(credential, inspect.custom, { value: () => `[Credential ${source}]`, enumerable: false });
  return Object.freeze(credential);
}

function checkKeyText(key: string, where: string): string {
  const trimmed = key.trim();
  if (trimmed === '') throw new FusionError('invalid_config', `${where} is empty`);
  if (/\s/.test(trimmed)) throw new FusionError('invalid_config', `${where} must hold only the key (it contains whitespace or several lines)`);
  return trimmed;
}

/** The key in `env[name]`, or `undefined` when the variable is unset or blank. */
export function credentialFromEnv(name: string, env: Record<string, string | undefined>): Credential | undefined {
  const value = env[name];
  if (value === undefined || value.trim() === '') return undefined;
  return makeCredential(checkKeyText(value, `environment variable ${name}`), `env ${name}`);
}

/** Reads a key file; it must be a regular file with no group/other permission bits. */
export function credentialFromFile(path: string): Credential {
  let mode: number;
  try {
    const st = statSync(path);
    if (!st.isFile()) throw new FusionError('invalid_config', `API key file ${path} is not a regular file`);
    mode = st.mode & 0o777;
  } catch (err) {
    if (err instanceof FusionError) throw err;
    throw new FusionError('invalid_config', `API key file ${path} cannot be read: ${(err as NodeJS.ErrnoException).code ?? 'error'}`, { details: { file: path } });
  }
  if ((mode & 0o077) !== 0) {
    throw new FusionError(
      'invalid_config',
      `API key file ${path} has mode 0${mode.toString(8)} and is readable by group or others; run: chmod 600 ${path}`,
      { details: { file: path, mode: `0${mode.toString(8)}` } },
    );
  }
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new FusionError('invalid_config', `API key file ${path} cannot be read: ${(err as NodeJS.ErrnoException).code ?? 'error'}`, { details: { file: path } });
  }
  return makeCredential(checkKeyText(text, `API key file ${path}`), `file ${path}`);
}
