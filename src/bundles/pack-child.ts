/**
 * The packer as its own process, run as the submitting caller (pack-as-caller.ts):
 * `node pack-child.js ROOT MAX_BYTES EXCLUDE_JSON`. The archive goes to stdout; the last stderr
 * line is a JSON summary (`{"ok":true,…}` or `{"ok":false,"error":{code,message,details}}`).
 */
import { packTree } from './pack.js';
import { toFusionError } from '../errors.js';

const [root, maxText, excludeText] = process.argv.slice(2);
try {
  if (root === undefined || maxText === undefined || excludeText === undefined) throw new Error('usage: pack-child ROOT MAX_BYTES EXCLUDE_JSON');
  const packed = await packTree(root, { maxBytes: Number(maxText), exclude: JSON.parse(excludeText) as string[] });
  await new Promise<void>((resolve, reject) => process.stdout.write(packed.data, (err) => (err ? reject(err) : resolve())));
  process.stderr.write(`${JSON.stringify({ ok: true, entries: packed.entries, skipped: packed.skipped })}\n`);
} catch (err) {
  const fe = toFusionError(err);
  process.stderr.write(`${JSON.stringify({ ok: false, error: { code: fe.code, message: fe.message, details: fe.details ?? {} } })}\n`);
  process.exitCode = 3;
}
