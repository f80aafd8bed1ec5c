/**
 * Packs a task's repository as the caller who submitted it (docs/security.md#repository-bundles).
 *
 * A member-uid caller's repository may sit in a 0700 home only that uid can read, and the daemon
 * must not read for a caller what the caller could not (repo-access.ts). So for such a caller the
 * packer (pack-child.ts) runs as a child that loads the package as root, then drops to the
 * caller's uid, gid and groups (no capabilities left, no new privileges, not dumpable) before it
 * reads the repository, and streams the archive back; root and the daemon's own uid pack in-process.
 *
 * The child runs as the caller, so the caller can tamper with what it sends: its output is
 * untrusted. The daemon bounds it by the cap, reads it back with the strict reader (a hostile
 * archive is never stored) and computes the digest itself. The caller can also stop the child or
 * hold its stdout open: a pack has a deadline (SIGKILL, then the submit is refused), and packs
 * go through a gate (pack-gate.ts: two at once, one per caller) so a burst of submits cannot
 * pile archives into the daemon's memory.
 */
import { spawn } from 'node:child_process';
import { FusionError } from '../errors.js';
import type { RunAs } from '../common/setpriv-args.js';
import { bundleTooLarge, sanitiseSkipReport, type PackedBundle, type SkipReport } from './pack.js';
import { createPackGate } from './pack-gate.js';
import { compiledBundleModule, packOffThread, verifyOffThread } from './off-thread.js';

export interface PackRequest {
  repo: string;
  exclude: readonly string[];
  maxBytes: number;
  /** The socket caller to read as; undefined → in-process (root, the daemon's uid, in-process callers). */
  caller?: RunAs;
  /** How long the packing child may take (default PACK_TIMEOUT_MS). */
  timeoutMs?: number;
  /**
   * The run's: a cancel or a daemon stop ends the pack at once (its child SIGKILLed). The caller
   * can stop its own child, which would otherwise hold the cancel or the stop until the deadline.
   */
  signal?: AbortSignal;
}

/** Entries allowed in a bundle (the reader's bound; far above any source tree under the cap). */
export const MAX_BUNDLE_ENTRIES = 1_000_000;

/** The compiled child entry. */
const childScript = (): string => compiledBundleModule('pack-child.js');

/** Packs running at once, daemon-wide (pack-gate.ts); one per caller. */
export const MAX_CONCURRENT_PACKS = 2;
/** How long a pack may take before its child is killed and the submit refused. */
export const PACK_TIMEOUT_MS = 300_000;
/** Of the child's stderr only the last line (its summary) is read: the tail kept. */
const STDERR_TAIL_BYTES = 64 * 1024;

const gate = createPackGate(MAX_CONCURRENT_PACKS);

export async function packRepo(req: PackRequest): Promise<PackedBundle> {
  const caller = req.caller;
  return gate.run(caller === undefined ? 'in-process' : `uid:${caller.uid}`, async () => {
    if (req.signal?.aborted === true) throw packStopped(req.repo);
    // Off the event loop either way (off-thread.ts): a large tree's archive and digest take seconds.
    if (caller === undefined) return packOffThread(req.repo, { exclude: req.exclude, maxBytes: req.maxBytes });
    const { data, summary } = await runChild(req, caller, req.timeoutMs ?? PACK_TIMEOUT_MS);
    // Untrusted bytes: bounded, strictly re-read (in a worker thread), digested here.
    if (data.length > req.maxBytes) throw bundleTooLarge(req.maxBytes, req.repo);
    const verified = await verifyOffThread(data, { maxBytes: req.maxBytes, maxEntries: MAX_BUNDLE_ENTRIES });
    // The summary is the caller's word too: counts and a bounded, flattened list of paths, used
    // only to tell the caller what their own task left out.
    return { digest: verified.digest, data: verified.data, entries: verified.entries, files: verified.files, skipped: sanitiseSkipReport(summary.skipped) };
  });
}

function packStopped(repo: string): FusionError {
  return new FusionError('cancelled', `packing repo ${repo} was stopped: the run was cancelled or the daemon is stopping`, { details: { field: 'repo', reason: 'pack_stopped' } });
}

interface ChildSummary {
  ok: boolean;
  entries?: number;
  skipped?: SkipReport;
  error?: { code: string; message: string; details: Record<string, unknown> };
}

/**
 * The child is the caller's own process: it may be stopped (SIGTERM never ends a stopped
 * process, SIGKILL does) and its stdout may be held open by another of the caller's processes
 * (pidfd_getfd), so its end is never awaited past the deadline: at the deadline it is
 * SIGKILLed, its streams are dropped and the submit is refused, whether or not they ever close.
 */
function runChild(req: PackRequest, caller: RunAs, timeoutMs: number): Promise<{ data: Buffer; summary: ChildSummary }> {
  // Root until the child drops to the caller itself (pack-child.ts: it must load the package,
  // which the caller may not be able to read); no new privileges through exec, none inherited.
  const as = JSON.stringify({ uid: caller.uid, gid: caller.gid, groups: caller.groups });
  const args = ['--no-new-privs', '--inh-caps=-all', '--', process.execPath, childScript(), as, req.repo, String(req.maxBytes), JSON.stringify(req.exclude)];
  return new Promise((resolve, reject) => {
    const child = spawn('setpriv', args, { cwd: '/', env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' }, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let outBytes = 0;
    let errTail = Buffer.alloc(0);
    let done = false;
    const finish = (outcome: { error: FusionError } | { data: Buffer; summary: ChildSummary }): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req.signal?.removeEventListener('abort', onAbort);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      child.stdout.destroy();
      child.stderr.destroy();
      if ('error' in outcome) reject(outcome.error);
      else resolve(outcome);
    };
    const timer = setTimeout(() => finish({
      error: new FusionError('invalid_input', `repo ${req.repo} was not packed within ${Math.round(timeoutMs / 1000)} s (packing as uid ${caller.uid}); the packer was killed and nothing was created`, {
        details: { field: 'repo', reason: 'pack_timeout', timeoutMs },
      }),
    }), timeoutMs);
    const onAbort = (): void => finish({ error: packStopped(req.repo) });
    req.signal?.addEventListener('abort', onAbort, { once: true });
    child.stdout.on('data', (chunk: Buffer) => {
      outBytes += chunk.length;
      if (outBytes > req.maxBytes) finish({ error: bundleTooLarge(req.maxBytes, req.repo) });
      else out.push(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      errTail = Buffer.concat([errTail, chunk]);
      if (errTail.length > STDERR_TAIL_BYTES) errTail = errTail.subarray(errTail.length - STDERR_TAIL_BYTES);
    });
    child.on('error', (err) => finish({ error: new FusionError('internal_error', `could not pack repo ${req.repo} as uid ${caller.uid}: ${err.message}`, { details: { field: 'repo' }, cause: err }) }));
    child.on('close', (code, signal) => {
      const lastLine = errTail.toString('utf8').trim().split('\n').at(-1) ?? '';
      let summary: ChildSummary | undefined;
      try {
        summary = JSON.parse(lastLine) as ChildSummary;
      } catch {
        summary = undefined;
      }
      if (code === 0 && summary?.ok === true) return finish({ data: Buffer.concat(out), summary });
      if (summary?.ok === false && summary.error?.code === 'invalid_input') {
        return finish({ error: new FusionError('invalid_input', summary.error.message, { details: summary.error.details }) });
      }
      const why = summary?.error?.message ?? (lastLine !== '' ? lastLine : `the packer exited with ${signal ?? `code ${code}`}`);
      finish({ error: new FusionError('internal_error', `could not pack repo ${req.repo} as uid ${caller.uid}: ${why.slice(0, 300)}`, { details: { field: 'repo' } }) });
    });
  });
}
