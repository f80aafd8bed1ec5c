/**
 * Intake: everything that can reject a submit, run before anything is created
 * (docs/behaviour.md#a8): the input normalised and canonicalised, the options checked against
 * their contract, the repository resolved as its caller, the budget forecast; and the receipt.
 */
import { realpathSync, statSync } from 'node:fs';
import { dirname, isAbsolute, resolve, sep } from 'node:path';
import { FusionError } from '../errors.js';
import type { Workflow } from '../contracts/constants.js';
import { normalizeToolInput } from '../contracts/tool-input.js';
import { buildCanonicalInput, canonicalJson, sha256Hex } from '../contracts/canonical.js';
import { receiptText, type Receipt } from '../contracts/api.js';
import { TaskOptionsSchema, type TaskOptions } from '../contracts/task-options.js';
import { assertForecastWithinBudget, planBudget, type BudgetConfig } from '../contracts/budget.js';
import type { TaskRecord } from '../store/port.js';
import type { PackRequest } from '../bundles/pack-as-caller.js';
import type { PackedBundle } from '../bundles/pack.js';
import { DEFAULT_REPO_EXCLUDES } from '../bundles/excludes.js';
import { isPrivileged, type CallerIdentity } from './caller.js';
import type { RepoAccessCheck } from './repo-access.js';
import type { RepoSnapshotReport } from './runner-port.js';

export interface SubmitRequest {
  workflow: Workflow;
  arguments: unknown;
  repo: string;
  options?: TaskOptions;
  /** Who submits (a fairness label for the per-caller bound, not an identity check); default "local". */
  caller?: string;
  /** The kernel-reported caller (SO_PEERCRED), recorded on the task; absent → an in-process caller. */
  identity?: CallerIdentity;
}

export interface IntakeDeps {
  tasksDir: string;
  budget?: BudgetConfig;
  preflightOptions?: (options: TaskOptions) => BudgetConfig | undefined;
  checkRepo?: RepoAccessCheck;
  daemonUid?: number;
}

export interface PreparedSubmit {
  repoDir: string;
  options: TaskOptions;
  canonicalInput: ReturnType<typeof buildCanonicalInput>;
  canonicalText: string;
  canonicalSha: string;
  plan: ReturnType<typeof planBudget>;
}

/** Validates and canonicalises a submit (throws invalid_input / budget errors); creates nothing. */
export function prepareSubmit(req: SubmitRequest, repo: string, deps: IntakeDeps): PreparedSubmit {
  const args = normalizeToolInput(req.workflow, req.arguments);
  const options = checkedOptions(req.options);
  const repoDir = validateRepoDir(repo, dirname(deps.tasksDir));
  // The roster serving this task also sets its prompt budgets (models file, context windows).
  const budget = deps.preflightOptions?.(options) ?? deps.budget;
  const canonicalInput = buildCanonicalInput({ workflow: req.workflow, cwd: repoDir, args });
  const canonicalText = canonicalJson(canonicalInput);
  const canonicalSha = sha256Hex(canonicalText);
  const plan = planBudget(Buffer.byteLength(canonicalText), budget);
  assertForecastWithinBudget(plan);
  return { repoDir, options, canonicalInput, canonicalText, canonicalSha, plan };
}

/** The options as their closed contract has them (an in-process caller skips the API's check). */
function checkedOptions(options: TaskOptions | undefined): TaskOptions {
  const parsed = TaskOptionsSchema.safeParse(options ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = ['options', ...(issue?.path ?? [])].join('.');
  throw new FusionError('invalid_input', `${field}: ${issue?.message ?? 'invalid'}`, { details: { field } });
}

/** The uid that reads anything: root and the daemon's own. */
function daemonUidOf(deps: Pick<IntakeDeps, 'daemonUid'>): number {
  return deps.daemonUid ?? process.getuid?.() ?? 0;
}

/**
 * The repository path a non-privileged caller asked for, as that caller sees it (its physical
 * path), or a refusal when it could not read it. Root and the daemon's uid read anything.
 */
export async function repoAsCaller(req: SubmitRequest, deps: Pick<IntakeDeps, 'checkRepo' | 'daemonUid'>): Promise<string> {
  const caller = req.identity;
  if (caller === undefined || isPrivileged(caller, daemonUidOf(deps)) || !isAbsolute(req.repo.trim())) return req.repo;
  if (deps.checkRepo === undefined) throw new FusionError('internal_error', 'no repository check is configured for non-root callers');
  return deps.checkRepo(req.repo.trim(), caller);
}

/** Cluster mode: the task's repository bundle, packed as the caller at submission. */
export function packAtSubmit(
  req: SubmitRequest,
  repoDir: string,
  bundles: { pack(req: PackRequest): Promise<PackedBundle>; maxBytes: number },
  deps: Pick<IntakeDeps, 'daemonUid'>,
): Promise<PackedBundle> {
  const caller = req.identity;
  const asCaller = caller !== undefined && !isPrivileged(caller, daemonUidOf(deps));
  return bundles.pack({ repo: repoDir, exclude: req.options?.repoExclude ?? DEFAULT_REPO_EXCLUDES, maxBytes: bundles.maxBytes, ...(asCaller ? { caller } : {}) });
}

export function snapshotReport(packed: PackedBundle): RepoSnapshotReport {
  return { digest: packed.digest, entries: packed.entries, files: packed.files, skipped: packed.skipped };
}

export function snapshotJson(packed: PackedBundle): string {
  return canonicalJson(snapshotReport(packed));
}

function validateRepoDir(repo: string, dataDir: string): string {
  const trimmed = repo.trim();
  if (!isAbsolute(trimmed)) {
    throw new FusionError('invalid_input', `repo must be an absolute directory path, got ${JSON.stringify(repo)}`, { details: { field: 'repo' } });
  }
  // The physical path (no symlinks): the sandbox binds exactly this directory and refuses to
  // start when the path names another one by then (docs/security.md#private-repos). The libc
  // realpath is one call where the JavaScript one lstats every component, on the receipt path.
  let repoDir: string | undefined;
  try {
    const real = realpathSync.native(trimmed);
    if (statSync(real).isDirectory()) repoDir = real;
  } catch {
    repoDir = undefined;
  }
  if (repoDir === undefined) throw new FusionError('invalid_input', `repo ${trimmed} is not a readable directory`, { details: { field: 'repo' } });
  // The daemon's own data (other tasks' results, the database) is never a repository to read.
  const data = resolve(dataDir);
  const inside = (a: string, b: string): boolean => a === b || a.startsWith(b.endsWith(sep) ? b : `${b}${sep}`);
  if (inside(repoDir, data) || inside(data, repoDir)) {
    throw new FusionError('invalid_input', `repo ${repoDir} overlaps the daemon's data directory ${data}; choose a repository outside it`, { details: { field: 'repo' } });
  }
  return repoDir;
}

export function receiptOf(workflow: Workflow, task: TaskRecord, requestSha256: string, canonicalInputSha256: string): Receipt {
  return {
    taskId: task.id,
    workflow,
    state: task.state,
    createdAt: task.createdAt,
    requestSha256,
    canonicalInputSha256,
    text: receiptText(workflow, task.id),
  };
}
