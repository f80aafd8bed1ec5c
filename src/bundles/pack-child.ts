/**
 * The packer as its own process, run for a socket caller (pack-as-caller.ts):
 * `node pack-child.js AS_JSON ROOT MAX_BYTES EXCLUDE_JSON`, where AS_JSON is the caller
 * `{"uid","gid","groups"}` (groups null: the user's groups from the group database).
 *
 * It starts as root so that it can load the package wherever it is installed (a clone under a
 * 0700 /root included: a caller's uid could not read it), and drops to the caller before it
 * touches the repository: every module is loaded by then (static imports run before this body).
 * After the drop it can gain nothing back (setuid(0) is refused, checked), and, having changed
 * its credentials, it is not dumpable: the caller cannot ptrace it or take its descriptors.
 * The archive goes to stdout; the last stderr line is a JSON summary (`{"ok":true,…}` or
 * `{"ok":false,"error":{code,message,details}}`).
 */
import process from 'node:process';
import { packTree } from './pack.js';
import { toFusionError } from '../errors.js';

interface RunAs {
  uid: number;
  gid: number;
  groups: number[] | null;
}

/** Becomes the caller for good; throws unless the kernel confirms it and refuses the way back. */
function becomeCaller(as: RunAs): void {
  const id = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) > 0 && (n as number) < 2 ** 32 - 1;
  if (!id(as.uid) || !id(as.gid) || (as.groups !== null && !(Array.isArray(as.groups) && as.groups.every((g) => Number.isSafeInteger(g) && g >= 0)))) {
    throw new Error(`pack-child: not a caller to run as: ${JSON.stringify(as)}`);
  }
  // initgroups(3) by uid: Node has it, its type declarations do not.
  if (as.groups === null) (process as unknown as { initgroups(user: number, extraGroup: number): void }).initgroups(as.uid, as.gid);
  else process.setgroups!(as.groups);
  process.setgid!(as.gid);
  process.setuid!(as.uid);
  if (process.getuid!() !== as.uid || process.geteuid!() !== as.uid || process.getgid!() !== as.gid || process.getegid!() !== as.gid) {
    throw new Error('pack-child: the drop to the caller did not take');
  }
  let regained = true;
  try {
    process.setuid!(0);
  } catch {
    regained = false;
  }
  if (regained) throw new Error('pack-child: could become root again after the drop');
}

const [asText, root, maxText, excludeText] = process.argv.slice(2);
try {
  if (asText === undefined || root === undefined || maxText === undefined || excludeText === undefined) throw new Error('usage: pack-child AS_JSON ROOT MAX_BYTES EXCLUDE_JSON');
  becomeCaller(JSON.parse(asText) as RunAs);
  const packed = await packTree(root, { maxBytes: Number(maxText), exclude: JSON.parse(excludeText) as string[] });
  await new Promise<void>((resolve, reject) => process.stdout.write(packed.data, (err) => (err ? reject(err) : resolve())));
  process.stderr.write(`${JSON.stringify({ ok: true, entries: packed.entries, skipped: packed.skipped })}\n`);
} catch (err) {
  const fe = toFusionError(err);
  process.stderr.write(`${JSON.stringify({ ok: false, error: { code: fe.code, message: fe.message, details: fe.details ?? {} } })}\n`);
  process.exitCode = 3;
}
