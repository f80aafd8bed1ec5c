/**
 * Per-attempt staging directories for sandboxes and stage workers.
 *
 * The data directory stays 0700 and root's; the sandbox runs as an unprivileged uid of its own
 * that must reach its bind sources (bwrap runs as that uid), so each attempt gets a directory
 * under a separate run root (0711: traversable, not listable). Its `out/` (0700) and broker socket
 * (0600) are handed to the sandbox's uid by the launcher when it starts the sandbox, never before
 * (`owner` is for callers that run no launcher). After the attempt, the supervisor copies what it
 * needs back into the task directory and removes it.
 */
import { chownSync, mkdirSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { FusionError } from '../errors.js';
import { MAX_OUT_FILES } from '../launcher/out-dir-usage.js';

export interface SandboxOwner {
  uid: number;
  gid: number;
}

export interface AttemptStaging {
  dir: string;
  outDir: string;
  socketDir: string;
  socketPath: string;
  requestFile: string;
  remove(): void;
}

/**
 * Creates the run root fresh and verifies it is ours. It sits in a shared directory (/tmp) under
 * a predictable name, so an existing entry is never trusted: it must be a real directory owned
 * by this uid (then it is a leftover of a killed daemon and is replaced), else start-up stops.
 * Created without `recursive`, so a directory someone else made in between fails loudly.
 */
export function prepareRunRoot(runRoot: string): void {
  let st;
  try {
    st = lstatSync(runRoot);
  } catch {
    st = undefined;
  }
  if (st) {
    const uid = process.getuid?.() ?? -1;
    if (!st.isDirectory() || st.isSymbolicLink() || st.uid !== uid) {
      throw new FusionError('invalid_config', `staging directory ${runRoot} exists but is not a directory owned by this daemon's uid ${uid}; remove it and start again`);
    }
    rmSync(runRoot, { recursive: true, force: true });
  }
  mkdirSync(runRoot, { mode: 0o711 });
  chmodSync(runRoot, 0o711);
}

export function createStaging(runRoot: string, name: string, owner: SandboxOwner | null): AttemptStaging {
  const dir = join(runRoot, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { mode: 0o711 });
  const outDir = join(dir, 'out');
  const socketDir = join(dir, 'sock');
  mkdirSync(outDir, { mode: 0o700 });
  // Traversable, not listable: the sandbox's uid reaches its socket (0600, its own once the
  // launcher hands it over); any other uid finds a socket it may not connect to.
  mkdirSync(socketDir, { mode: 0o711 });
  chmodSync(socketDir, 0o711);
  if (owner) {
    chownSync(outDir, owner.uid, owner.gid);
    chownSync(socketDir, owner.uid, owner.gid);
  }
  return {
    dir,
    outDir,
    socketDir,
    socketPath: join(socketDir, 'broker.sock'),
    requestFile: join(dir, 'request.json'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** The request file is read-only for everyone: it holds no secret, and the child must not change it. */
export function writeRequestFile(staging: AttemptStaging, request: unknown): void {
  writeFileSync(staging.requestFile, JSON.stringify(request), { mode: 0o444 });
}

import { closeSync, fstatSync, lstatSync, openSync, readSync, readdirSync, writeSync, constants as fsConstants } from 'node:fs';

/**
 * Copies the regular files an attempt wrote into the task's own attempt directory. Each file is
 * opened with O_NOFOLLOW|O_NONBLOCK and checked on the open descriptor (a symlink, FIFO or
 * device swapped in after a listing is never followed or read), copied from that descriptor
 * into a new 0600 file, and the total is capped so a child cannot fill the data disk.
 */
/** File names collected from a sandbox's output directory (fit a plain ustar header). */
export const PLAIN_OUTPUT_NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$/;

export function collectOutputs(outDir: string, destDir: string, maxTotalBytes: number): { files: string[]; skipped: string[] } {
  mkdirSync(destDir, { recursive: true, mode: 0o700 });
  const files: string[] = [];
  const skipped: string[] = [];
  let total = 0;
  const names = readdirSync(outDir).sort().slice(0, MAX_OUT_FILES);
  for (const name of names) {
    // The child names its files: only plain names are kept. A long or non-ASCII name would need
    // a PAX header in the task tarball (which its strict reader refuses, so one stray file would
    // make the whole task unverifiable), and control characters would reach terminals.
    if (!PLAIN_OUTPUT_NAME.test(name)) {
      skipped.push(name);
      continue;
    }
    let fd: number;
    try {
      fd = openSync(join(outDir, name), fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
    } catch {
      skipped.push(name);
      continue;
    }
    try {
      const st = fstatSync(fd);
      if (!st.isFile() || total + st.size > maxTotalBytes) {
        skipped.push(name);
        continue;
      }
      total += st.size;
      const out = openSync(join(destDir, name), fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL, 0o600);
      try {
        const buf = Buffer.allocUnsafe(64 * 1024);
        // Never more than the size checked above, even if the file were still growing.
        let copied = 0;
        while (copied < st.size) {
          const n = readSync(fd, buf, 0, Math.min(buf.length, st.size - copied), null);
          if (n === 0) break;
          writeSync(out, buf, 0, n);
          copied += n;
        }
      } finally {
        closeSync(out);
      }
      files.push(name);
    } finally {
      closeSync(fd);
    }
  }
  return { files, skipped };
}
