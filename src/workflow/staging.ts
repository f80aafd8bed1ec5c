/**
 * Per-attempt staging directories for sandboxes and stage workers.
 *
 * The data directory stays 0700 and root's; the sandbox runs as an unprivileged uid that must
 * reach its bind sources (bwrap runs as that uid), so each attempt gets a directory under a
 * separate run root (0711: traversable, not listable) owned by the sandbox uid. After the
 * attempt, the supervisor copies what it needs back into the task directory and removes it.
 */
import { chownSync, mkdirSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { FusionError } from '../errors.js';

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
  mkdirSync(socketDir, { mode: 0o700 });
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

import { lstatSync, readdirSync, copyFileSync, constants as fsConstants } from 'node:fs';

/**
 * Copies the regular files an attempt wrote into the task's own attempt directory. Symlinks,
 * devices and directories are skipped (a child cannot make the supervisor read elsewhere), and
 * the total is capped so a child cannot fill the data disk.
 */
export function collectOutputs(outDir: string, destDir: string, maxTotalBytes: number): { files: string[]; skipped: string[] } {
  mkdirSync(destDir, { recursive: true, mode: 0o700 });
  const files: string[] = [];
  const skipped: string[] = [];
  let total = 0;
  for (const name of readdirSync(outDir).sort()) {
    const src = join(outDir, name);
    const st = lstatSync(src);
    if (!st.isFile() || total + st.size > maxTotalBytes) {
      skipped.push(name);
      continue;
    }
    total += st.size;
    copyFileSync(src, join(destDir, name), fsConstants.COPYFILE_EXCL);
    chmodSync(join(destDir, name), 0o600);
    files.push(name);
  }
  return { files, skipped };
}
