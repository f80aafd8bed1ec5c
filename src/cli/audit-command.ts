/**
 * `fusion audit export TASK -o FILE.tar` and `fusion audit verify TASK|FILE.tar [--file|--id]
 * [--max-bytes N] [--pubkey FILE] [--replay [--repo DIR]]`. A task id (WORKFLOW-<32 hex>) is
 * read from the database, a path (one with a `/` or ending in `.tar`, or any with --file) from
 * disk; anything else is refused rather than guessed from what exists in the current directory. Both work without a daemon: export reads the sealed tarball from the
 * database of the data directory, or in cluster mode from the shared PostgreSQL database
 * (--database-url / FUSION_DATABASE_URL, as `fusion keys`); verify needs nothing but the file
 * (and, to pin the signer, the public key; to replay, a checkout of the repository).
 *
 * verify exits 0 when every check holds and 1 naming the first broken member.
 */
import { closeSync, fstatSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { WORKFLOWS } from '../contracts/constants.js';
import { resolve } from 'node:path';
import { FusionError, toFusionError } from '../errors.js';
import { openStoreAt, type StoreLocation } from './task-store-at.js';
import { dataPaths } from '../tasks/paths.js';
import type { KeyObject } from 'node:crypto';
import { loadSigningKey, parsePublicKey } from '../audit/signing.js';
import { loadUnsignedBeforeKey, type UnsignedBeforeKey } from '../audit/unsigned-before-key.js';
import { verifyTaskTarball, type OfflineVerifyReport } from '../audit/offline-verify.js';
import { readMembers } from '../audit/tar-members.js';
import { flag, has, parseArgs, usageError } from '../config/args.js';
import { flagSpecFor } from '../config/options.js';
import { resolveHome, type Env } from '../config/settings.js';
import type { Io } from './commands.js';
import { checkCreatable, withPath } from './path-errors.js';

const FLAGS = flagSpecFor('audit');

/** How `fusion audit verify` names a task by id: the daemon's ids are WORKFLOW-<32 hex>. */
export const TASK_ID_PATTERN = new RegExp(`^(?:${WORKFLOWS.join('|')})-[0-9a-f]{32}$`);

/**
 * The largest tarball `audit verify` reads (a sealed task holds its attempts' logs, capped at
 * 48 MiB per child, and its answer): verifying holds the tarball in memory once, so an
 * oversized file is refused before it is read rather than exhausting the auditor's memory.
 * Raised with --max-bytes N or FUSION_AUDIT_MAX_BYTES.
 */
export const AUDIT_VERIFY_MAX_BYTES = 256 * 1024 * 1024;

function maxBytesOf(args: ReturnType<typeof parseArgs>, env: Env): number {
  const [text, source] = flag(args, 'max-bytes') !== undefined ? [flag(args, 'max-bytes')!, '--max-bytes'] : [env.FUSION_AUDIT_MAX_BYTES, 'FUSION_AUDIT_MAX_BYTES'];
  if (text === undefined || text.trim() === '') return AUDIT_VERIFY_MAX_BYTES;
  if (!/^[1-9][0-9]{0,15}$/.test(text.trim())) throw usageError(`${source} must be a positive whole number of bytes, got ${JSON.stringify(text)}`);
  return Number(text.trim());
}

/** A tarball verified by id (from the database) or by path: never guessed from what happens to exist. */
type VerifyTarget = { kind: 'id'; id: string } | { kind: 'file'; path: string };

function verifyTargetOf(target: string, args: ReturnType<typeof parseArgs>): VerifyTarget {
  if (has(args, 'file') && has(args, 'id')) throw usageError('--file and --id exclude each other');
  if (has(args, 'file')) return { kind: 'file', path: target };
  if (has(args, 'id')) {
    if (!TASK_ID_PATTERN.test(target)) throw usageError(`--id ${JSON.stringify(target)} is not a task id (WORKFLOW-<32 hex digits>, e.g. investigate-0123…)`);
    return { kind: 'id', id: target };
  }
  if (target.includes('/') || target.endsWith('.tar')) return { kind: 'file', path: target };
  if (TASK_ID_PATTERN.test(target)) return { kind: 'id', id: target };
  throw usageError(
    `${JSON.stringify(target)} is neither a task id (WORKFLOW-<32 hex digits>) nor a tarball path (one that contains / or ends in .tar); ` +
      `for a file in this directory write ./${target} or pass --file`,
  );
}

/** Reads a tarball file, refusing one over `maxBytes` before reading it. */
function readTarball(path: string, maxBytes: number): Buffer {
  const fd = withPath(path, 'FILE', 'read', () => openSync(path, 'r'));
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new FusionError('invalid_input', `${path} is not a regular file`, { details: { field: 'FILE' } });
    if (st.size > maxBytes) throw tooLarge(path, st.size, maxBytes);
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

function tooLarge(what: string, size: number, maxBytes: number): FusionError {
  return new FusionError('payload_too_large', `${what} is ${size} bytes, over the ${maxBytes}-byte cap of audit verify (it holds the tarball in memory); raise it with --max-bytes N or FUSION_AUDIT_MAX_BYTES=N`, {
    details: { field: 'max-bytes', bytes: size, maxBytes },
  });
}

async function tarballFromStore(where: StoreLocation, taskId: string): Promise<Buffer> {
  const { store, name } = await openStoreAt(where);
  try {
    const sealed = await store.getTaskTarball(taskId);
    if (sealed === null) {
      const task = await store.getTask(taskId);
      if (task === null) throw new FusionError('not_found', `no task ${taskId} in ${name}`);
      throw new FusionError('not_found', `task ${taskId} is ${task.state} and has no sealed tarball yet (a task is sealed when it ends)`);
    }
    return sealed.data;
  } finally {
    await store.close();
  }
}

/** The list of tasks sealed before the key, beside the key in `home`, checked against `publicKey` (or why it cannot be used). */
function listBeside(home: string, publicKey: KeyObject): UnsignedBeforeKey | null | { unusable: string } {
  try {
    return loadUnsignedBeforeKey(home, publicKey);
  } catch (err) {
    return { unusable: toFusionError(err).message };
  }
}

export async function auditCommand(argv: readonly string[], env: Env, io: Io): Promise<number> {
  const [sub, ...raw] = argv;
  // `-o FILE` is the documented short form of --out.
  const rest = raw.map((a) => (a === '-o' ? '--out' : a));
  const args = parseArgs(rest, FLAGS);
  const target = args.positionals[0];
  if (target === undefined || args.positionals.length > 1) throw usageError(`usage: fusion audit ${sub ?? 'export|verify'} TASK${sub === 'verify' ? '|FILE.tar [--file|--id] [--max-bytes N]' : ''} …`);
  const home = resolveHome(args, env);
  // Cluster mode: the shared PostgreSQL database holds every task's sealed tarball.
  const databaseUrl = (flag(args, 'database-url') ?? env.FUSION_DATABASE_URL)?.trim();
  const where: StoreLocation = databaseUrl ? { url: databaseUrl } : { home };

  if (sub === 'export') {
    const out = flag(args, 'out');
    if (out === undefined) throw usageError('fusion audit export TASK -o FILE.tar: -o is required');
    // The destination is checked before the database is opened: a wrong path is said first.
    checkCreatable(out, '-o');
    const data = await tarballFromStore(where, target);
    withPath(out, '-o', 'write', () => writeFileSync(resolve(out), data, { mode: 0o600, flag: 'wx' }));
    io.stderr(`fusion: exported ${target}: ${data.length} bytes, ${readMembers(data).length} members → ${resolve(out)}\n`);
    return 0;
  }
  if (sub !== 'verify') throw usageError(`unknown audit subcommand ${JSON.stringify(sub)}; use export or verify`);

  const chosen = verifyTargetOf(target, args);
  const isFile = chosen.kind === 'file';
  const maxBytes = maxBytesOf(args, env);
  let data: Buffer;
  if (chosen.kind === 'file') {
    io.stderr(`fusion: verifying the tarball file ${resolve(chosen.path)}\n`);
    data = readTarball(chosen.path, maxBytes);
  } else {
    io.stderr(`fusion: verifying the sealed record of task ${chosen.id} from ${'url' in where ? 'the cluster database' : dataPaths(where.home).dbFile}\n`);
    data = await tarballFromStore(where, chosen.id);
    if (data.length > maxBytes) throw tooLarge(`the sealed tarball of task ${chosen.id}`, data.length, maxBytes);
  }
  const pubkeyFile = flag(args, 'pubkey');
  // A task read from this data directory is pinned to this directory's own key when it has one.
  // Only its public half is used, so the verifier need not be the key's owner (root auditing a daemon's tasks).
  const publicKey = pubkeyFile !== undefined ? parsePublicKey(withPath(pubkeyFile, '--pubkey', 'read', () => readFileSync(pubkeyFile))) : isFile ? undefined : (loadSigningKey(home, { requireOwner: false })?.publicKey ?? undefined);
  const publicKeySource = pubkeyFile !== undefined ? `--pubkey ${pubkeyFile}` : `the signing key of the data directory ${home} (no --pubkey was given)`;
  // A task read by id: the key's signed list says whether it was sealed unsigned before the key.
  const unsignedBeforeKey = publicKey !== undefined && !isFile ? listBeside(home, publicKey) : undefined;
  let replayRepo: string | undefined;
  if (has(args, 'replay')) {
    replayRepo = flag(args, 'repo');
    if (replayRepo === undefined) {
      // The recorded repository path is the tarball's word: for a file, trusted only when its signer
      // is pinned, or a crafted tarball could point the replay at any directory of the auditor's machine.
      if (isFile && publicKey === undefined) throw usageError('--replay without --repo uses the repository recorded in the tarball, trusted only with a pinned key: pass --pubkey FILE, or --repo DIR');
      const task = readMembers(data).find((m) => m.name === 'task.json');
      let recorded: unknown;
      try {
        recorded = task === undefined ? undefined : (JSON.parse(task.data.toString('utf8')) as { repo_dir?: unknown }).repo_dir;
      } catch {
        recorded = undefined;
      }
      replayRepo = typeof recorded === 'string' && recorded !== '' ? recorded : undefined;
      if (replayRepo === undefined) throw usageError('--replay needs --repo DIR (a checkout of the repository the task read)');
    }
    replayRepo = resolve(replayRepo);
  } else if (flag(args, 'repo') !== undefined) {
    throw usageError('--repo is only used with --replay');
  }
  // A task read by id from the database must be that task's record, not another one's moved in.
  const report = await verifyTaskTarball(data, { ...(publicKey ? { publicKey, publicKeySource } : {}), ...(unsignedBeforeKey !== undefined ? { unsignedBeforeKey } : {}), ...(replayRepo ? { replayRepo } : {}), ...(chosen.kind === 'id' ? { taskId: chosen.id } : {}) });
  printReport(report, io, has(args, 'json'));
  return report.ok ? 0 : 1;
}

/**
 * Text from the tarball (member names, task id, messages quoting them) shown with control
 * characters escaped: a crafted name must not move the cursor or rewrite a BROKEN line into
 * something that reads like "verified" on the auditor's terminal.
 */
function shown(text: string): string {
  let out = '';
  for (const c of text) {
    const code = c.codePointAt(0)!;
    const control = code < 0x20 || (code >= 0x7f && code <= 0x9f) || code === 0x2028 || code === 0x2029;
    out += control ? `\\u${code.toString(16).padStart(4, '0')}` : c;
  }
  return out;
}

function printReport(report: OfflineVerifyReport, io: Io, json: boolean): void {
  if (json) {
    io.stdout(`${JSON.stringify(report, null, 2)}\n`);
    return;
  }
  for (const check of report.checks) io.stdout(`ok   ${shown(check)}\n`);
  // Neither verified nor a forgery: a result that depended on a wall-clock limit.
  for (const call of report.inconclusive) io.stdout(`??   ${shown(call.member)}: ${shown(call.message)}\n`);
  if (report.ok) {
    const signer = report.signed
      ? `signed by sha256:${report.signer ?? ''}${report.pinned ? ' (pinned)' : ' (not pinned: pass --pubkey)'}`
      : report.sealedBeforeKey !== null ? `UNSIGNED (sealed before the signing key was created on ${report.sealedBeforeKey})` : 'UNSIGNED';
    io.stdout(`verified: task ${shown(report.taskId ?? '?')} (${shown(report.state ?? '?')}), ${report.members} members, ${signer}${report.replayed > 0 ? `, ${report.replayed} tool calls replayed` : ''}\n`);
  } else {
    io.stdout(`BROKEN: ${shown(report.failure?.member ?? '?')}: ${shown(report.failure?.message ?? 'verification failed')}\n`);
  }
}
