/**
 * The `fusion` commands other than `daemon`. Output: human text by default, `--json` for
 * machines. Exit codes: exit-codes.ts.
 */
import { readFileSync } from 'node:fs';
import { readableHere } from '../common/readable.js';
import { resolve } from 'node:path';
import { FusionError } from '../errors.js';
import type { Workflow } from '../contracts/constants.js';
import { normalizeToolInput } from '../contracts/tool-input.js';
import { flag, flagAll, has, usageError, type ParsedArgs } from '../config/args.js';
import { sourcesFrom } from './sources.js';
import { EXIT, endedTaskExit } from './exit-codes.js';
import { withPath } from './path-errors.js';

export interface Io {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  readStdin: () => string;
}

export function readJsonSource(source: string, io: Io, what: string): unknown {
  const text = source === '-' ? io.readStdin() : withPath(source, what, 'read', () => readFileSync(resolve(source), 'utf8'));
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new FusionError('invalid_input', `${what} is not valid JSON: ${(err as Error).message}`, { details: { source } });
  }
}

/** `fusion validate TOOL [FILE|-]`: prints the normalised arguments, creates nothing. */
export function validateCommand(args: ParsedArgs, io: Io): number {
  const [tool, source = '-'] = args.positionals;
  const workflow = toolWorkflow(tool);
  const input = readJsonSource(source, io, 'tool arguments');
  try {
    io.stdout(`${JSON.stringify(normalizeToolInput(workflow, input), null, 2)}\n`);
    return 0;
  } catch (err) {
    if (err instanceof FusionError && err.code === 'invalid_input') {
      io.stderr(`${err.message}\n`);
      return 2;
    }
    throw err;
  }
}

function toolWorkflow(tool: string | undefined): Workflow {
  if (tool === 'fusion_investigate' || tool === 'investigate') return 'investigate';
  if (tool === 'fusion_research' || tool === 'research') return 'research';
  throw usageError(`validate needs a tool: fusion_investigate or fusion_research (got ${tool === undefined ? 'nothing' : JSON.stringify(tool)})`);
}

/** Builds the tool arguments from `--input` or from the flags. */
export function toolArguments(workflow: Workflow, args: ParsedArgs, io: Io): unknown {
  const input = flag(args, 'input');
  const fromFlags = ['objective', 'background', 'deliverable', 'scope', 'constraint', 'source', 'purpose'].some((f) => has(args, f));
  if (input !== undefined) {
    if (fromFlags) throw usageError('use either --input or the --objective/--background/… flags, not both');
    return readJsonSource(input, io, '--input');
  }
  // background is a required key (docs/behaviour.md#a2): absent unless --background was given, so
  // the CLI refuses what `fusion validate` and MCP refuse rather than inventing `background: []`.
  const out: Record<string, unknown> = {
    objective: flag(args, 'objective'),
    background: has(args, 'background') ? flagAll(args, 'background') : undefined,
    deliverable: flag(args, 'deliverable'),
  };
  if (has(args, 'scope')) out.scope = flagAll(args, 'scope');
  if (has(args, 'constraint')) out.constraints = flagAll(args, 'constraint');
  if (workflow === 'research') out.sources = sourcesFrom(args.order);
  else if (has(args, 'source') || has(args, 'purpose')) throw usageError('--source and --purpose are only for fusion research');
  for (const k of Object.keys(out)) if (out[k] === undefined) delete out[k];
  return out;
}

export function printTask(task: Record<string, unknown>, io: Io, json: boolean): void {
  if (json) return io.stdout(`${JSON.stringify(task, null, 2)}\n`);
  const err = task.error as { code: string; message: string; state: string } | null;
  io.stdout(`${String(task.taskId)}  ${String(task.workflow)}  ${String(task.state)}  created ${String(task.createdAt)}\n`);
  if (err) io.stdout(`  error: ${err.code} (while ${err.state}): ${err.message}\n`);
  const usage = task.usage as { entries?: Array<{ stage: string; model: string; requests: number; inputTokens: number; outputTokens: number; cost?: number }>; totals?: { requests: number; inputTokens: number; outputTokens: number; cost?: number } } | null;
  if (usage?.totals) {
    const t = usage.totals;
    io.stdout(`  usage: ${t.requests} model requests, ${t.inputTokens} tokens in, ${t.outputTokens} tokens out${t.cost === undefined ? '' : `, cost ${t.cost.toFixed(4)}`}\n`);
    for (const e of usage.entries ?? []) io.stdout(`    ${e.stage.padEnd(12)} ${e.model.padEnd(28)} ${e.requests} req, ${e.inputTokens} in, ${e.outputTokens} out${e.cost === undefined ? '' : `, cost ${e.cost.toFixed(4)}`}\n`);
  }
}

/**
 * Prints a bg_result reply; returns the exit code. An artifact this user cannot open (a
 * socket-group member; another host's copy) is fetched over the socket with `fetchAnswer`.
 */
export async function printResult(result: Record<string, unknown>, io: Io, json: boolean, fetchAnswer?: (sha256: string) => Promise<Buffer>): Promise<number> {
  const answer = result.answer as { present: boolean; header?: string; text?: string; path?: string; sha256?: string; reason?: string };
  const status = String(result.status);
  if (json) io.stdout(`${JSON.stringify(result, null, 2)}\n`);
  else if (answer.present) {
    io.stderr(`${answer.header ?? ''}${result.engine ? ` Engine: ${String(result.engine)}.` : ''}\n`);
    // "verified" is the digests; the content's own check is the citations line.
    const citations = result.citations as { checked: number; confirmed: number; unconfirmed: unknown[] } | undefined;
    if (citations !== undefined) io.stderr(`Citations: ${citations.checked} checked, ${citations.confirmed} confirmed, ${citations.unconfirmed.length} unconfirmed.\n`);
    if (answer.text !== undefined) io.stdout(answer.text.endsWith('\n') ? answer.text : `${answer.text}\n`);
    else if (fetchAnswer === undefined || answer.path === undefined || readableHere(answer.path)) io.stdout(`Answer stored at ${String(answer.path)} (delivery: artifact)\n`);
    else {
      const text = (await fetchAnswer(String(answer.sha256))).toString('utf8');
      io.stderr(`(${answer.path} is not readable by this user: the verified answer came over the socket)\n`);
      io.stdout(text.endsWith('\n') ? text : `${text}\n`);
    }
  } else if (status === 'running') {
    io.stdout(`${String(result.taskId)} is still running (${String(result.stage ?? result.state)}); wait for it with 'fusion wait ${String(result.taskId)}'.\n`);
  } else {
    const err = result.error as { code: string; message: string; state: string } | null | undefined;
    io.stdout(`${String(result.taskId)} ${status}: no answer was committed${err ? ` (${err.code} while ${err.state}: ${err.message})` : ''}.\n`);
  }
  // Verified but written from nothing has its own code (the header on stderr says why).
  if (answer.present) return endedTaskExit('completed', result.nothingRead as boolean | undefined);
  // Still running is neither success nor failure: its own code, so a script cannot take it for a result.
  return status === 'running' ? EXIT.stillRunning : EXIT.failed;
}

