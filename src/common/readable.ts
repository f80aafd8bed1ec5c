/**
 * Whether this process may open a file for reading. An artifact answer lives in the daemon's
 * 0700 data directory: its own user reads it there, a socket-group member cannot (and then
 * fetches the bytes over the socket instead).
 */
import { accessSync, constants } from 'node:fs';

export function readableHere(path: string): boolean {
  try {
    accessSync(path, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}
