/**
 * Replay of a candidate's repository tool calls. read/grep/find/ls are deterministic over a
 * read-only repository, so the supervisor re-runs each call with the arguments the model sent
 * (taken from the broker, never from the child) and compares the result digest with the one
 * the child logged and sent back to the model.
 *
 * Each call also records what it depended on: the digest of the file or directory tree it
 * looked at (file contents included, `.git`/`node_modules` skipped like the tools skip them).
 * A later offline replay whose result differs can then tell "the repository changed since the
 * run" (a recorded digest differs) from a real mismatch (every recorded digest is equal).
 *
 * Node builtins only: this file runs inside the sandbox (sandbox/replay-main.ts) and in the
 * offline verifier.
 */
import { readdir } from 'node:fs/promises';
import { DEFAULT_TOOL_LIMITS, isToolName, runTool, type ToolLimits } from './tools/index.js';
import { openRegularFile } from './tools/open-regular.js';
import { resolveInRepo } from './path-confine.js';
import { SKIPPED_DIR_NAMES, startsInsideSkipped } from './tools/walk.js';
import { sha256Hex } from '../src/contracts/sha256.js';

export const REPLAY_SCHEMA = 'fusion.replay.v1';

/** One call to replay: the tool name and the raw arguments text the model produced. */
export interface ReplayCall {
  ordinal: number;
  tool_name: string;
  arguments: string;
}

export interface ReplayedCall {
  ordinal: number;
  tool_name: string;
  status: 'ok' | 'error';
  result_bytes: number;
  result_sha256: string;
  /**
   * The replay's own result was cut by a wall-clock limit (a slow regex batch or the call's time
   * budget): on a mismatch, the difference may come from the host's load rather than a forgery.
   */
  timer_cut?: true;
  /** What the result depended on: repo-relative path (`.` = root) → digest of its content/tree. */
  touched: Record<string, string>;
}

/**
 * The replay runs the repository tools with wall-clock limits this many times the candidate's,
 * so that on a loaded host it is rarely cut where the candidate was not. The limits only stop
 * work early; a call that finishes within them answers the same whatever their values.
 */
export const REPLAY_TIMER_FACTOR = 5;

/** The candidate's tool limits with the wall-clock ones relaxed by REPLAY_TIMER_FACTOR. */
export function replayToolLimits(limits?: Partial<ToolLimits>): Partial<ToolLimits> {
  const base = { ...DEFAULT_TOOL_LIMITS, ...limits };
  return { ...limits, regexTimeoutMs: base.regexTimeoutMs * REPLAY_TIMER_FACTOR, timeBudgetMs: base.timeBudgetMs * REPLAY_TIMER_FACTOR };
}

/** Upper bound of entries hashed per scope, like the tools' own walk cap. */
const MAX_TREE_ENTRIES = 200_000;

/** What `execute` in the agent loop answers, for the same call (kept equal on purpose). */
async function runLikeTheChild(root: string, call: ReplayCall, allowed: ReadonlySet<string>, limits?: Partial<ToolLimits>): Promise<{ status: 'ok' | 'error'; text: string; timerCut?: true }> {
  if (!allowed.has(call.tool_name)) {
    const available = [...allowed].join(', ') || 'none';
    return { status: 'error', text: `tool ${JSON.stringify(call.tool_name.slice(0, 100))} is not available to this agent; available tools: ${available}` };
  }
  let args: unknown;
  try {
    args = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments);
  } catch {
    return { status: 'error', text: `${call.tool_name} arguments must be valid JSON` };
  }
  if (!isToolName(call.tool_name)) return { status: 'error', text: `tool ${JSON.stringify(call.tool_name.slice(0, 100))} has no implementation in this child` };
  const result = await runTool(call.tool_name, root, args, limits);
  if (!result.ok) return { status: 'error', text: result.error };
  return result.timerCut === true ? { status: 'ok', text: result.text, timerCut: true } : { status: 'ok', text: result.text };
}

/** The path argument a call looked at (`.` when it has none or it cannot be read). */
function scopeOf(call: ReplayCall): string {
  try {
    const args = JSON.parse(call.arguments === '' ? '{}' : call.arguments) as { path?: unknown };
    return typeof args.path === 'string' && args.path !== '' ? args.path : '.';
  } catch {
    return '.';
  }
}

/** Digest of a directory tree: sorted `path\tkind\tdigest` lines, file contents included. */
async function treeDigest(realDir: string, display: string, fileCache: Map<string, string>): Promise<string> {
  const skipIgnored = !startsInsideSkipped(display);
  const lines: string[] = [];
  const stack: Array<{ abs: string; rel: string }> = [{ abs: realDir, rel: '' }];
  let seen = 0;
  while (stack.length > 0 && seen < MAX_TREE_ENTRIES) {
    const dir = stack.pop() as { abs: string; rel: string };
    let dirents;
    try {
      dirents = await readdir(dir.abs, { withFileTypes: true });
    } catch {
      lines.push(`${dir.rel || '.'}\tunreadable\t`);
      continue;
    }
    for (const d of dirents) {
      seen += 1;
      const rel = dir.rel === '' ? d.name : `${dir.rel}/${d.name}`;
      const abs = `${dir.abs}/${d.name}`;
      if (d.isDirectory()) {
        if (skipIgnored && SKIPPED_DIR_NAMES.has(d.name)) continue;
        lines.push(`${rel}\tdir\t`);
        stack.push({ abs, rel });
      } else if (d.isFile()) {
        lines.push(`${rel}\tfile\t${await fileDigest(abs, fileCache)}`);
      } else if (d.isSymbolicLink()) {
        lines.push(`${rel}\tlink\t`);
      } else {
        lines.push(`${rel}\tother\t`);
      }
    }
  }
  lines.sort();
  return sha256Hex(lines.join('\n'));
}

/** SHA-256 of a regular file, or null for anything else (never blocks on a FIFO or device). */
async function regularDigest(abs: string): Promise<string | null> {
  try {
    const opened = await openRegularFile(abs);
    if (opened.special !== undefined) return null;
    try {
      return sha256Hex(await opened.fh.readFile());
    } finally {
      await opened.fh.close();
    }
  } catch {
    return null;
  }
}

async function fileDigest(abs: string, cache: Map<string, string>): Promise<string> {
  let digest = cache.get(abs);
  if (digest === undefined) {
    digest = (await regularDigest(abs)) ?? 'unreadable';
    cache.set(abs, digest);
  }
  return digest;
}

/** What a call's result depends on, keyed by its repo-relative scope. */
async function touchedBy(root: string, call: ReplayCall, fileCache: Map<string, string>, treeCache: Map<string, string>): Promise<Record<string, string>> {
  const scope = scopeOf(call);
  let resolved;
  try {
    resolved = await resolveInRepo(root, scope);
  } catch {
    // The path does not resolve: the result is an error that depends on its absence.
    return { [scope]: 'absent' };
  }
  const key = resolved.displayPath;
  let digest = treeCache.get(resolved.realPath);
  if (digest === undefined) {
    const kind = await openRegularFile(resolved.realPath).then(async (opened) => {
      if (opened.special !== undefined) return opened.special;
      await opened.fh.close();
      return null;
    }, () => 'unreadable');
    if (kind === 'directory') digest = await treeDigest(resolved.realPath, key, fileCache);
    else digest = kind === null ? ((await regularDigest(resolved.realPath)) ?? 'unreadable') : 'unreadable';
    treeCache.set(resolved.realPath, digest);
  }
  return { [key]: digest };
}

/**
 * A replayer over `root`: replays one call at a time, sharing the file and tree digests between
 * calls (the repository is read-only while it runs). Only repository tools are replayed: a fetch
 * is proven by the broker's own record instead; for any other name it returns null.
 */
export function createReplayer(root: string, allowedTools: readonly string[], limits?: Partial<ToolLimits>): (call: ReplayCall) => Promise<ReplayedCall | null> {
  const allowed = new Set(allowedTools);
  const fileCache = new Map<string, string>();
  const treeCache = new Map<string, string>();
  return async (call) => {
    if (!isToolName(call.tool_name)) return null;
    const { status, text, timerCut } = await runLikeTheChild(root, call, allowed, limits);
    const bytes = Buffer.from(text, 'utf8');
    return {
      ordinal: call.ordinal,
      tool_name: call.tool_name,
      status,
      result_bytes: bytes.length,
      result_sha256: sha256Hex(bytes),
      ...(timerCut === true ? { timer_cut: true as const } : {}),
      touched: await touchedBy(root, call, fileCache, treeCache),
    };
  };
}

/** Replays `calls` over `root` in order (repository tools only). */
export async function replayCalls(root: string, calls: readonly ReplayCall[], allowedTools: readonly string[], limits?: Partial<ToolLimits>): Promise<ReplayedCall[]> {
  const replay = createReplayer(root, allowedTools, limits);
  const out: ReplayedCall[] = [];
  for (const call of calls) {
    const done = await replay(call);
    if (done !== null) out.push(done);
  }
  return out;
}

/**
 * Answers a call identical to one replayed before (same tool, same arguments text) with that
 * replay: /repo cannot change, so running it again can only give the same result. Except a result
 * a wall-clock limit cut: it depended on the host's load at that moment, so the next identical
 * call (a retried attempt's, after that attempt was inconclusive) is replayed afresh.
 */
export function onceForSameCalls(replay: (call: ReplayCall) => Promise<ReplayedCall | null>): (call: ReplayCall) => Promise<ReplayedCall | null> {
  const seen = new Map<string, Promise<ReplayedCall | null>>();
  return async (call) => {
    const key = `${call.tool_name}\u0000${call.arguments}`;
    let done = seen.get(key);
    if (done === undefined) {
      done = replay(call);
      seen.set(key, done);
    }
    const result = await done;
    if (result?.timer_cut === true && seen.get(key) === done) seen.delete(key);
    return result === null ? null : { ...result, ordinal: call.ordinal };
  };
}
