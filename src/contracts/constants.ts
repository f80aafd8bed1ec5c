/**
 * Constants shared by the daemon and the sandbox child. No imports: the child loads this file
 * at run time inside the sandbox, where no npm package exists.
 */

/** Schema id prefix (SPEC `<ns>`). */
export const SCHEMA_NS = 'fusion.';

export const SCHEMA = {
  fusionInput: `${SCHEMA_NS}fusion-input.v1`,
  blindCandidates: `${SCHEMA_NS}fusion-blind-candidates.v1`,
  /** v2: v1 plus `citation_checks` (the mechanical check of every citation, per candidate id). */
  mergeInput: `${SCHEMA_NS}fusion-merge-input.v2`,
  evaluation: `${SCHEMA_NS}fusion-evaluation.v1`,
  toolCall: `${SCHEMA_NS}fusion-tool-call.v1`,
  toolCallSeal: `${SCHEMA_NS}fusion-tool-call-seal.v1`,
  sourcePolicy: `${SCHEMA_NS}fusion-source-policy.v1`,
  childRequest: `${SCHEMA_NS}fusion-child-request.v1`,
  result: `${SCHEMA_NS}fusion-result.v1`,
} as const;

export const WORKFLOWS = ['investigate', 'research'] as const;
export type Workflow = (typeof WORKFLOWS)[number];

export const TOOL_NAMES = { investigate: 'fusion_investigate', research: 'fusion_research' } as const;

export const CLEAN_TASK_POLICY_ID = 'fusion-clean-task-v1';

/** Per-child limits (docs/behaviour.md#b9). */
export const CHILD_LIMITS = {
  wallMs: 50 * 60_000,
  idleMs: 35 * 60_000,
  maxModelRequests: 550,
  maxToolCalls: 600,
  maxToolResultBytes: 32 * 1024 * 1024,
  maxStdoutBytes: 32 * 1024 * 1024,
  maxStderrBytes: 16 * 1024 * 1024,
  killGraceMs: 3_000,
} as const;

/** Output caps (docs/behaviour.md#b8), measured as Buffer.byteLength(JSON.stringify(text)). */
export const OUTPUT_CAPS = {
  candidateBytes: 48 * 1024,
  evaluatorBytes: 64 * 1024,
  mergerBytes: 64 * 1024,
} as const;

/** bg_result inline delivery limit (docs/behaviour.md#f3). */
export const INLINE_LIMIT_BYTES = 49_152;

export const CANDIDATE_TOOLS = ['read', 'grep', 'find', 'ls'] as const;
export const RESEARCH_FETCH_TOOL = 'fusion_web_fetch';

/**
 * The tool-call log's event kind for a call the agent refused without running anything: a tool
 * name it does not offer, or arguments that are not a JSON object. It sits in the log's
 * `tool_name` field, is always allowlisted and always has status `error`.
 */
export const REJECTED_CALL_EVENT = 'fusion_rejected_call';
