/**
 * Shared types and limits of the candidate tools (read, grep, find, ls).
 * Node builtins only: this code runs inside the sandbox.
 */
import type { CANDIDATE_TOOLS } from '../../src/contracts/constants.js';

export type ToolName = (typeof CANDIDATE_TOOLS)[number];

/**
 * `timerCut`: a wall-clock limit (regexTimeoutMs or timeBudgetMs) cut the result short, so the
 * same call can answer differently on a less loaded host. The replay uses it to tell a
 * time-dependent result from a forged one.
 */
export type ToolResult = { ok: true; text: string; timerCut?: true } | { ok: false; error: string };

/** A tool never throws: every failure comes back as `{ ok: false, error }`. */
export type ToolImpl = (root: string, args: unknown, limits?: Partial<ToolLimits>) => Promise<ToolResult>;

export interface ToolLimits {
  /** Cap on the UTF-8 size of a tool's text output (notes included). */
  maxOutputBytes: number;
  /** grep skips files larger than this. */
  maxGrepFileBytes: number;
  /** grep skips lines longer than this (bounds regex cost per line). */
  maxGrepLineChars: number;
  /** grep cuts each reported line to this many characters. */
  maxGrepLineOutputChars: number;
  /** ls shows at most this many entries. */
  maxLsEntries: number;
  /** grep/find stop walking after visiting this many directory entries. */
  maxWalkEntries: number;
  /** Wall-clock budget of one grep/find call. */
  timeBudgetMs: number;
  /** grep aborts when one batch of regex matching runs longer than this (catastrophic regex). */
  regexTimeoutMs: number;
}

export const DEFAULT_TOOL_LIMITS: Readonly<ToolLimits> = Object.freeze({
  maxOutputBytes: 64 * 1024,
  maxGrepFileBytes: 1024 * 1024,
  maxGrepLineChars: 10_000,
  maxGrepLineOutputChars: 300,
  maxLsEntries: 1000,
  maxWalkEntries: 200_000,
  timeBudgetMs: 30_000,
  regexTimeoutMs: 2_000,
});

export const MIN_OUTPUT_BYTES = 1024;

/** Defaults for anything not given; invalid (non-positive, non-finite) values are ignored. */
export function resolveLimits(limits: Partial<ToolLimits> | undefined): ToolLimits {
  const out: ToolLimits = { ...DEFAULT_TOOL_LIMITS };
  if (limits) {
    for (const key of Object.keys(out) as (keyof ToolLimits)[]) {
      const value = limits[key];
      if (typeof value === 'number' && Number.isFinite(value) && value > 0) out[key] = value;
    }
  }
  // Room for the trailing notes: below this the notes themselves would not fit.
  out.maxOutputBytes = Math.max(MIN_OUTPUT_BYTES, Math.floor(out.maxOutputBytes));
  return out;
}

/** Argument-level limits, also used by the JSON schemas in TOOL_SPECS. */
export const ARG_LIMITS = {
  readDefaultLines: 400,
  readMaxLines: 2000,
  grepDefaultMatches: 100,
  grepMaxMatches: 1000,
  findDefaultResults: 200,
  findMaxResults: 2000,
  maxPatternChars: 1000,
} as const;
