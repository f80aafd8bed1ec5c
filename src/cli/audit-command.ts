/**
 * `fusion audit export TASK -o FILE.tar` and `fusion audit verify TASK|FILE.tar [--pubkey FILE]
 * [--replay [--repo DIR]]`. Both work without a daemon: export reads the sealed tarball from the
 * database of the data directory, or in cluster mode from the shared PostgreSQL database
 * (--database-url / FUSION_DATABASE_URL, as `fusion keys`); verify needs nothing but the file
 * (and, to pin the signer, the public key; to replay, a checkout of the repository).
 *
 * verify exits 0 when every check holds and 1 naming the first broken member.
 */
import { existsSync, readFileSync, writeFileSync, lstatSync } from 'node:fs';
import { resolve } from 'node:path';
import { FusionError } from '../errors.js';
import { silentLogger } from '../log.js';
import { openSqliteStore } from '../store/sqlite-store.js';
import { openPgStore } from '../store/pg-store.js';
import type { Store } from '../store/port.js';
import { dataPaths } from '../tasks/paths.js';
import { loadSigningKey, parsePublicKey } from '../audit/signing.js';
import { verifyTaskTarball, type OfflineVerifyReport } from '../audit/offline-verify.js';
import { readMembers } from '../audit/tar-members.js';
import { flag, has, parseArgs, usageError } from '../config/args.js';
import { resolveHome, type Env } from '../config/settings.js';
import type { Io } from './commands.js';

const FLAGS = { data: { value: true }, 'database-url': { value: true }, out: { value: true }, pubkey: { value: true }, replay: {}, repo: { value: true }, json: {}, help: {} };

/** Where the sealed tarballs are: the data directory's SQLite file, or the cluster's PostgreSQL database. */
type StoreLocation = { home: string } | { url: string };

async function openStore(where: StoreLocation): Promise<{ store: Store; name: string }> {
  if ('url' in where) {
    const store = await openPgStore({ url: where.url, log: silentLogger(), maxConnections: 1 });
    return { store, name: store.file };
  }
  const file = dataPaths(where.home).dbFile;
  if (!existsSync(file)) throw new FusionError('not_found', `no database at ${file}; pass --data DIR (or FUSION_HOME) of the daemon that ran the task, or --database-url in cluster mode`);
  return { store: await openSqliteStore({ file, log: silentLogger() }), name: file };
}

async function tarballFromStore(where: StoreLocation, taskId: string): Promise<Buffer> {
  const { store, name } = await openStore(where);
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

export async function auditCommand(argv: readonly string[], env: Env, io: Io): Promise<number> {
  const [sub, ...raw] = argv;
  // `-o FILE` is the documented short form of --out.
  const rest = raw.map((a) => (a === '-o' ? '--out' : a));
  const args = parseArgs(rest, FLAGS);
  const target = args.positionals[0];
  if (target === undefined || args.positionals.length > 1) throw usageError(`usage: fusion audit ${sub ?? 'export|verify'} TASK${sub === 'verify' ? '|FILE.tar' : ''} …`);
  const home = resolveHome(args, env);
  // Cluster mode: the shared PostgreSQL database holds every task's sealed tarball.
  const databaseUrl = (flag(args, 'database-url') ?? env.FUSION_DATABASE_URL)?.trim();
  const where: StoreLocation = databaseUrl ? { url: databaseUrl } : { home };

  if (sub === 'export') {
    const out = flag(args, 'out');
    if (out === undefined) throw usageError('fusion audit export TASK -o FILE.tar: -o is required');
    const data = await tarballFromStore(where, target);
    writeFileSync(resolve(out), data, { mode: 0o600, flag: 'wx' });
    io.stderr(`fusion: exported ${target}: ${data.length} bytes, ${readMembers(data).length} members → ${resolve(out)}\n`);
    return 0;
  }
  if (sub !== 'verify') throw usageError(`unknown audit subcommand ${JSON.stringify(sub)}; use export or verify`);

  const isFile = existsSync(target) && lstatSync(target).isFile();
  const data = isFile ? readFileSync(target) : await tarballFromStore(where, target);
  const pubkeyFile = flag(args, 'pubkey');
  // A task read from this data directory is pinned to this directory's own key when it has one.
  // Only its public half is used, so the verifier need not be the key's owner (root auditing a daemon's tasks).
  const publicKey = pubkeyFile !== undefined ? parsePublicKey(readFileSync(pubkeyFile)) : isFile ? undefined : (loadSigningKey(home, { requireOwner: false })?.publicKey ?? undefined);
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
  const report = await verifyTaskTarball(data, { ...(publicKey ? { publicKey } : {}), ...(replayRepo ? { replayRepo } : {}), ...(isFile ? {} : { taskId: target }) });
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
  if (report.ok) {
    const signer = report.signed ? `signed by sha256:${report.signer ?? ''}${report.pinned ? ' (pinned)' : ' (not pinned: pass --pubkey)'}` : 'UNSIGNED';
    io.stdout(`verified: task ${shown(report.taskId ?? '?')} (${shown(report.state ?? '?')}), ${report.members} members, ${signer}${report.replayed > 0 ? `, ${report.replayed} tool calls replayed` : ''}\n`);
  } else {
    io.stdout(`BROKEN: ${shown(report.failure?.member ?? '?')}: ${shown(report.failure?.message ?? 'verification failed')}\n`);
  }
}
