/**
 * A file the user named (an --input file, an export destination, a tarball, a key) that could
 * not be opened, said as what is wrong with that path and how to fix it. Without this the raw
 * errno escapes: an ENOENT reads like a vanished daemon socket, an EISDIR like a bug.
 */
import { accessSync, constants, lstatSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { FusionError } from '../errors.js';

/** Which side of the file the command was on: reading it, or creating it. */
export type PathUse = 'read' | 'write';

function problemOf(code: string | undefined, path: string, use: PathUse): string | undefined {
  switch (code) {
    case 'ENOENT':
      return use === 'read' ? 'no such file' : `its directory ${dirname(path)} does not exist (create it first, or choose another path)`;
    case 'EISDIR':
      return use === 'read' ? 'it is a directory, not a file' : 'it is a directory; give a file name inside it';
    case 'EEXIST':
      return 'it already exists and is never overwritten; remove it or choose another path';
    case 'ENOTDIR':
      return 'a part of the path is a file, not a directory';
    case 'EACCES':
    case 'EPERM':
      return use === 'read' ? 'permission denied (this user may not read it)' : `permission denied (this user may not create files in ${dirname(path)})`;
    case 'EROFS':
      return 'the file system is read-only';
    case 'ENOSPC':
      return 'the disk is full';
    case 'ELOOP':
      return 'too many symbolic links';
    case 'ENAMETOOLONG':
      return 'the path is too long';
    default:
      return undefined;
  }
}

/**
 * `err` from opening `path` as an input error naming `what` (the flag or argument); anything
 * that is not a path problem is returned unchanged.
 */
export function pathError(err: unknown, path: string, what: string, use: PathUse): unknown {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  const full = resolve(path);
  const problem = problemOf(code, full, use);
  if (problem === undefined) return err;
  return new FusionError('invalid_input', `${what} ${full}: ${problem}`, { cause: err, details: { field: what, path: full, errno: code } });
}

/** Runs `fn` (which opens `path`), turning a path problem into pathError's input error. */
export function withPath<T>(path: string, what: string, use: PathUse, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw pathError(err, path, what, use);
  }
}

/**
 * Checks before any work that `path` can be created as a new file: it does not exist yet, and
 * its directory exists and admits this user. The create itself still refuses to overwrite.
 */
export function checkCreatable(path: string, what: string): void {
  const full = resolve(path);
  const existing = lstatOrError(full);
  if (existing === undefined) throw pathError(Object.assign(new Error('exists'), { code: 'EEXIST' }), full, what, 'write');
  if (existing.code !== 'ENOENT') throw pathError(existing, full, what, 'write');
  try {
    if (!statSync(dirname(full)).isDirectory()) throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' });
    accessSync(dirname(full), constants.W_OK | constants.X_OK);
  } catch (err) {
    throw pathError(err, full, what, 'write');
  }
}

/** lstat's error, or undefined when something is at `path`. */
function lstatOrError(path: string): NodeJS.ErrnoException | undefined {
  try {
    lstatSync(path);
    return undefined;
  } catch (err) {
    return err as NodeJS.ErrnoException;
  }
}
