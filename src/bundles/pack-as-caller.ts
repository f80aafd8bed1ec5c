/**
 * Packs a task's repository as the caller who submitted it (docs/security.md#repository-bundles).
 *
 * A member-uid caller's repository may sit in a 0700 home only that uid can read, and the daemon
 * must not read for a caller what the caller could not (repo-access.ts). So for such a caller the
 * packer (pack-child.ts) runs as a child under `setpriv` with the caller's uid, gid and groups,
 * no capabilities, and streams the archive back; root and the daemon's own uid pack in-process.
 *
 * The child runs as the caller, so the caller can tamper with what it sends: its output is
 * untrusted. The daemon bounds it by the cap, reads it back with the strict reader (a hostile
 * archive is never stored) and computes the digest itself.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { FusionError } from '../errors.js';
import { setprivArgs, type RunAs } from '../common/setpriv-args.js';
import { readBundleTar } from './bundle-tar.js';
import { bundleTooLarge, packTree, type PackedBundle } from './pack.js';

export interface PackRequest {
  repo: string;
  exclude: readonly string[];
  maxBytes: number;
  /** The socket caller to read as; undefined → in-process (root, the daemon's uid, in-process callers). */
  caller?: RunAs;
}

/** Entries allowed in a bundle (the reader's bound; far above any source tree under the cap). */
export const MAX_BUNDLE_ENTRIES = 1_000_000;

/** The compiled child entry (under vitest this module is TypeScript: use the build in dist/). */
function childScript(): string {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith('.ts')) {
    const built = here.replace(/([\\/])src([\\/])bundles([\\/])[^\\/]+\.ts$/u, '$1dist$2src$2bundles$3pack-child.js');
    if (existsSync(built)) return built;
  }
  return fileURLToPath(new URL('./pack-child.js', import.meta.url));
}

export async function packRepo(req: PackRequest): Promise<PackedBundle> {
  if (req.caller === undefined) return packTree(req.repo, { exclude: req.exclude, maxBytes: req.maxBytes });
  const { data, summary } = await runChild(req, req.caller);
  // Untrusted bytes: bounded, strictly re-read, digested here.
  if (data.length > req.maxBytes) throw bundleTooLarge(req.maxBytes, req.repo);
  readBundleTar(data, { maxBytes: req.maxBytes, maxEntries: MAX_BUNDLE_ENTRIES });
  return { digest: createHash('sha256').update(data).digest('hex'), data, entries: summary.entries ?? 0, skipped: summary.skipped ?? { escapingLinks: 0, special: 0, unreadable: 0 } };
}

interface ChildSummary {
  ok: boolean;
  entries?: number;
  skipped?: PackedBundle['skipped'];
  error?: { code: string; message: string; details: Record<string, unknown> };
}

function runChild(req: PackRequest, caller: RunAs): Promise<{ data: Buffer; summary: ChildSummary }> {
  const args = [...setprivArgs(caller), '--', process.execPath, childScript(), req.repo, String(req.maxBytes), JSON.stringify(req.exclude)];
  return new Promise((resolve, reject) => {
    execFile('setpriv', args, { encoding: 'buffer', maxBuffer: req.maxBytes + 1, timeout: 300_000, cwd: '/', env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } }, (err, stdout, stderr) => {
      const lastLine = stderr.toString('utf8').trim().split('\n').at(-1) ?? '';
      let summary: ChildSummary | undefined;
      try {
        summary = JSON.parse(lastLine) as ChildSummary;
      } catch {
        summary = undefined;
      }
      if ((err as { code?: unknown } | null)?.code === 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER') return reject(bundleTooLarge(req.maxBytes, req.repo));
      if (err === null && summary?.ok === true) return resolve({ data: stdout, summary });
      if (summary?.ok === false && summary.error?.code === 'invalid_input') {
        return reject(new FusionError('invalid_input', summary.error.message, { details: summary.error.details }));
      }
      reject(new FusionError('internal_error', `could not pack repo ${req.repo} as uid ${caller.uid}: ${(summary?.error?.message ?? lastLine ?? (err as Error | null)?.message ?? 'no output').slice(0, 300)}`, {
        details: { field: 'repo' },
      }));
    });
  });
}
