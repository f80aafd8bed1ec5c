/**
 * `fusion keys signing-init` and `fusion keys signing-public`: the Ed25519 key pair that signs
 * every task tarball. The private key stays in the data directory (0600); the public key is
 * what an auditor pins (`fusion audit verify --pubkey FILE`).
 *
 * signing-init needs the data directory to itself (docs/security.md#signing-later): a daemon
 * reads the key only at start-up, so one running now would go on sealing tasks unsigned after
 * the key exists, and those would be neither signed nor on the key's list of tasks sealed
 * before it (their results would then be refused). It takes the data directory's lock, records
 * every task sealed unsigned so far in that list, signed by the new key, then writes the key.
 */
import { chownSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { initSigningKey, loadSigningKey, signingKeyPaths } from '../audit/signing.js';
import { writeUnsignedBeforeKey, type UnsignedBeforeKey } from '../audit/unsigned-before-key.js';
import { isTerminal, type TaskState } from '../contracts/task-state.js';
import { FusionError } from '../errors.js';
import { DATA_DIR_LOCK_FILE, takeDataDirLock, type DataDirLock } from '../store/data-dir-lock.js';
import { flag, has, parseArgs, usageError } from '../config/args.js';
import { flagSpecFor } from '../config/options.js';
import { resolveHome, type Env } from '../config/settings.js';
import type { Io } from './commands.js';
import { openStoreAt, storeExists, type StoreLocation } from './task-store-at.js';

const HOLDER = 'the command fusion keys signing-init';

/** The data directory's lock, or a refusal naming the daemon to stop first. */
async function holdDataDir(home: string): Promise<DataDirLock> {
  const lockFile = join(home, DATA_DIR_LOCK_FILE);
  let lock: DataDirLock;
  try {
    lock = await takeDataDirLock(home, { socket: '', holder: HOLDER });
  } catch (err) {
    if (!(err instanceof FusionError) || err.details?.ownerPid === undefined) throw err;
    throw new FusionError(
      'conflict',
      `the fusion daemon pid ${String(err.details.ownerPid)} runs on ${home}: stop it, run fusion keys signing-init again, then start it. ` +
        'A daemon reads the signing key only at start-up: one left running would seal its tasks unsigned after the key exists, ' +
        'and those would not be on the list of tasks sealed before the key (their results would be refused). ' +
        'Tasks it is running when stopped resume at the next start and are sealed signed.',
      { details: { path: home, ownerPid: err.details.ownerPid } },
    );
  }
  // Root creating the key of another user's data directory: the daemon must still open its lock.
  const owner = statSync(home);
  if (process.getuid?.() === 0 && owner.uid !== 0) chownSync(lockFile, owner.uid, owner.gid);
  return lock;
}

interface BeforeKey {
  unsigned: Array<{ taskId: string; sha256: string }>;
  /** Tasks not yet ended: sealed, signed, when a daemon with the key runs them to their end. */
  unfinished: number;
}

async function tasksBeforeKey(where: StoreLocation): Promise<BeforeKey> {
  if (!storeExists(where)) return { unsigned: [], unfinished: 0 };
  const { store } = await openStoreAt(where);
  try {
    const counts = await store.countTasksByState();
    const unfinished = Object.entries(counts).filter(([state]) => !isTerminal(state as TaskState)).reduce((n, [, c]) => n + c, 0);
    return { unsigned: await store.listUnsignedTaskTarballs(), unfinished };
  } finally {
    await store.close();
  }
}

export async function signingKeyCommand(argv: readonly string[], env: Env, io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, flagSpecFor('keys'), 'keys');
  const json = has(args, 'json');
  if (args.positionals.length > 0) throw usageError(`unexpected argument ${JSON.stringify(args.positionals[0])}`);
  const home = resolveHome(args, env);
  if (sub === 'signing-init') {
    mkdirSync(home, { recursive: true, mode: 0o700 });
    const databaseUrl = (flag(args, 'database-url') ?? env.FUSION_DATABASE_URL)?.trim();
    const where: StoreLocation = databaseUrl ? { url: databaseUrl } : { home };
    const lock = await holdDataDir(home);
    let list!: UnsignedBeforeKey;
    let before: BeforeKey;
    let key;
    try {
      before = await tasksBeforeKey(where);
      key = initSigningKey(home, (k) => {
        list = writeUnsignedBeforeKey(home, k, before.unsigned, new Date().toISOString());
      });
    } finally {
      await lock.release();
    }
    const paths = signingKeyPaths(home);
    io.stderr(`fusion: signing key created: ${paths.privateKey} (0600); public key ${paths.publicKey}; key id sha256:${key.publicKeySha256}\n`);
    io.stderr(
      before.unsigned.length === 0
        ? `fusion: no task was sealed unsigned before this key (${list.file} records that, signed by the key)\n`
        : `fusion: ${before.unsigned.length} task(s) sealed unsigned before this key stay unsigned: their results stay readable, and fusion audit verify reports them as ` +
            `"unsigned (sealed before the signing key was created on ${list.createdAt})"; the list is ${list.file}, signed by the key (keep it with the key)\n`,
    );
    io.stderr(
      // A daemon loads the key of its own data directory: name it, so a key made for the wrong one
      // (no FUSION_HOME while the service runs on /var/lib/fusion) is noticed.
      `fusion: start the daemon of data directory ${home} (--data/FUSION_HOME) to use the key: from then on every task tarball is signed, and a result is delivered only with a valid signature or when its task is on that list` +
        `${before.unfinished > 0 ? `; the ${before.unfinished} task(s) not yet ended are sealed signed when they end` : ''}\n`,
    );
    if (databaseUrl) io.stderr('fusion: cluster mode: give every daemon of the cluster this key and list, and restart them all (a daemon started without it seals unsigned)\n');
    io.stderr(`fusion: auditors pin the public key: fusion audit verify TASK --pubkey ${paths.publicKey}\n`);
    io.stdout(
      json
        ? `${JSON.stringify({ keyId: `sha256:${key.publicKeySha256}`, publicKeyPem: key.publicKeyPem, unsignedBeforeKey: { file: list.file, keyCreatedAt: list.createdAt, tasks: before.unsigned.map((t) => t.taskId) }, unfinishedTasks: before.unfinished }, null, 2)}\n`
        : key.publicKeyPem,
    );
    return 0;
  }
  if (sub === 'signing-public') {
    const key = loadSigningKey(home);
    if (key === null) throw new FusionError('not_found', `no signing key in ${home}; create one with: fusion keys signing-init`);
    io.stderr(`fusion: key id sha256:${key.publicKeySha256}\n`);
    io.stdout(json ? `${JSON.stringify({ keyId: `sha256:${key.publicKeySha256}`, publicKeyPem: key.publicKeyPem }, null, 2)}\n` : key.publicKeyPem);
    return 0;
  }
  throw usageError(`unknown keys subcommand ${JSON.stringify(sub)}; use signing-init or signing-public`);
}
