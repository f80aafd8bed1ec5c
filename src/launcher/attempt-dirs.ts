/**
 * Per-attempt staging directories for sandboxes and stage workers, under the daemon's run root
 * (docs/security.md#threat-local-users).
 *
 * The data directory stays 0700 and root's; the sandbox runs as an unprivileged uid of its own
 * that must reach its broker socket (bwrap binds it as that uid), so a root daemon's run root is
 * outside the data directory, in /run: a directory only root can create names in, so no other
 * account can take the name first or plant a link under it. The run root and each attempt's
 * directory are 0711 (traversable, not listable), and nothing in them is readable by another
 * uid: `request.json` is root's 0400 (the launcher hands it over through a descriptor or a private
 * copy), `out/` (0700) and the broker socket (0600) are handed to the sandbox's uid by the
 * launcher when it starts the sandbox, never before (`owner` is for callers that run no launcher).
 * After the attempt, the supervisor copies what it needs back into the task directory and
 * removes it.
 */
import {
  chmodSync, chownSync, closeSync, fstatSync, lstatSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, readdirSync, rmSync, writeFileSync, writeSync,
  constants as fsConstants, type Stats,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { FusionError } from '../errors.js';
import { MAX_OUT_FILES } from '../launcher/out-dir-usage.js';
import { sha256Hex } from '../contracts/sha256.js';
import { writeFileDurable } from '../common/durable-fs.js';

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

/** The per-run directory of one daemon: every attempt's staging lives below it. */
export interface RunRoot {
  path: string;
  /** Removes the run root (and its record, if any): a clean stop leaves nothing behind. */
  remove(): void;
}

/**
 * The longest run root that leaves room for `<12 of the task id>-<stage>.attempt-N[-rp]/sock/broker.sock`
 * below it within a Unix socket path's 107 bytes.
 */
export const MAX_RUN_ROOT_LENGTH = 43;
/** Where a root daemon keeps its run roots: root-owned and not writable by anyone else. */
export const ROOT_RUN_PARENT = '/run';
/** The fallback's prefix in $TMPDIR (a random name made exclusively, recorded in the data directory). */
const FALLBACK_PREFIX = 'fusion-run-';
/** The data directory's record of a fallback run root, so the next start removes it. */
const FALLBACK_RECORD = 'run-root';
/** In a /run run root: the data directory it belongs to (for `removeOrphanRunRoots`). */
const HOME_MARK = '.home';
const RUN_ROOT_NAME = /^fusion-[0-9a-f]{12}$/;

const ownUid = (): number => process.getuid?.() ?? -1;

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}

/** A real directory (never a link to one) owned by this process's uid. */
function isOwnDirectory(path: string): boolean {
  const st = lstatOrNull(path);
  return st !== null && st.isDirectory() && !st.isSymbolicLink() && st.uid === ownUid();
}

/** A directory only root (this daemon) can create entries in: no name there can be taken first. */
function rootOnlyParent(path: string): boolean {
  const st = lstatOrNull(path);
  return st !== null && st.isDirectory() && !st.isSymbolicLink() && st.uid === 0 && (st.mode & 0o022) === 0;
}

/**
 * Creates `path` fresh: a leftover of a dead run of this data directory (a real directory owned
 * by this uid) is removed first; anything else there stops start-up. Created without
 * `recursive`, so an entry made in between fails loudly instead of being adopted. Callers hold
 * the data directory's lock (`store/data-dir-lock.ts`), so no live daemon uses it.
 */
export function prepareRunRoot(runRoot: string, mode = 0o711): void {
  if (lstatOrNull(runRoot) !== null) {
    if (!isOwnDirectory(runRoot)) {
      throw new FusionError('invalid_config', `staging directory ${runRoot} exists but is not a directory owned by this daemon's uid ${ownUid()}; remove it and start again`, { details: { path: runRoot } });
    }
    rmSync(runRoot, { recursive: true, force: true });
  }
  mkdirSync(runRoot, { mode });
  chmodSync(runRoot, mode);
}

/**
 * The run root of a daemon on `home`, created fresh (docs/operations.md#run-root):
 *   - root: `/run/fusion-<12 hex of the home path>`, 0711 (sandbox uids traverse it to their socket);
 *   - another uid: `<home>/run`, 0700 (its sandboxes run as that uid), if the path is short enough;
 *   - else a `fusion-run-XXXXXX` directory made exclusively under a random name in $TMPDIR, its
 *     path recorded in the data directory so the next start removes it.
 * It also removes what an older build of this data directory left in $TMPDIR (`fsn-<uid>-<hash>`
 * and its `.pid`), never following a link, and /run run roots of data directories that are gone.
 */
export function claimRunRoot(home: string): RunRoot {
  const uid = ownUid();
  removeLegacyRunRoot(home);
  const record = join(home, FALLBACK_RECORD);
  removeRecordedRunRoot(record);
  const plain = (path: string): RunRoot => ({ path, remove: () => rmSync(path, { recursive: true, force: true }) });
  if (uid === 0 && rootOnlyParent(ROOT_RUN_PARENT)) {
    const path = join(ROOT_RUN_PARENT, `fusion-${sha256Hex(home).slice(0, 12)}`);
    removeOrphanRunRoots(ROOT_RUN_PARENT, path);
    prepareRunRoot(path, 0o711);
    writeFileSync(join(path, HOME_MARK), home, { mode: 0o600, flag: 'wx' });
    return plain(path);
  }
  const inHome = join(home, 'run');
  if (uid !== 0 && inHome.length <= MAX_RUN_ROOT_LENGTH) {
    prepareRunRoot(inHome, 0o700);
    return plain(inHome);
  }
  // mkdtemp: an exclusive mkdir under a name nobody can predict (so none can be taken first), in
  // a sticky $TMPDIR (so nobody else can swap it afterwards).
  const path = mkdtempSync(join(tmpdir(), FALLBACK_PREFIX));
  chmodSync(path, uid === 0 ? 0o711 : 0o700);
  if (path.length > MAX_RUN_ROOT_LENGTH) {
    rmSync(path, { recursive: true, force: true });
    throw new FusionError('invalid_config', `the staging directory ${path} is too long for the broker socket paths below it (at most ${MAX_RUN_ROOT_LENGTH} characters); set TMPDIR to a shorter directory`, { details: { field: 'TMPDIR', path } });
  }
  writeFileDurable(record, `${path}\n`, 0o600);
  return {
    path,
    remove: () => {
      rmSync(path, { recursive: true, force: true });
      rmSync(record, { force: true });
    },
  };
}

/**
 * Run roots in /run whose data directory no longer exists: a daemon killed there is never
 * started again on it, so its leftovers would stay until the next boot. Each run root names its
 * data directory in `HOME_MARK`; one whose data directory exists is left to that directory's
 * next daemon (it may be running now).
 */
function removeOrphanRunRoots(parent: string, own: string): void {
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return;
  }
  for (const name of names) {
    const path = join(parent, name);
    if (path === own || !RUN_ROOT_NAME.test(name) || !isOwnDirectory(path)) continue;
    let home: string;
    try {
      home = readFileSync(join(path, HOME_MARK), 'utf8');
    } catch {
      continue;
    }
    if (home.startsWith('/') && lstatOrNull(home) === null) rmSync(path, { recursive: true, force: true });
  }
}

/** A fallback run root a dead run recorded: removed if it is still one of ours. */
function removeRecordedRunRoot(record: string): void {
  let path: string;
  try {
    path = readFileSync(record, 'utf8').trim();
  } catch {
    return;
  }
  if (basename(path).startsWith(FALLBACK_PREFIX) && dirname(path) === tmpdir() && isOwnDirectory(path)) rmSync(path, { recursive: true, force: true });
  rmSync(record, { force: true });
}

/** What a build that staged in `$TMPDIR/fsn-<uid>-<8 hex>` left for this data directory. */
function removeLegacyRunRoot(home: string): void {
  const legacy = join(tmpdir(), `fsn-${ownUid()}-${sha256Hex(home).slice(0, 8)}`);
  if (isOwnDirectory(legacy)) rmSync(legacy, { recursive: true, force: true });
  const pidFile = `${legacy}.pid`;
  const st = lstatOrNull(pidFile);
  if (st !== null && st.isFile() && st.uid === ownUid()) rmSync(pidFile, { force: true });
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

/**
 * The request (objective, declared URLs, prompts) is root's alone, 0400: the sandbox gets it
 * through a descriptor the launcher opens (bwrap) or a private copy (Docker), never by path, and
 * the path shows in a sandbox's /proc/<pid>/mountinfo to every local user. Created exclusively
 * in the fresh attempt directory.
 */
export function writeRequestFile(staging: AttemptStaging, request: unknown): void {
  const fd = openSync(staging.requestFile, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW, 0o400);
  try {
    writeFileSync(fd, JSON.stringify(request));
  } finally {
    closeSync(fd);
  }
}

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
