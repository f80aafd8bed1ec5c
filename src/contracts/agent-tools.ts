/**
 * The agent tools' input contracts (closed zod schemas). The MCP tool list is generated from
 * these (src/mcp/tool-schemas.ts), so a tool's JSON Schema cannot drift from its contract.
 *
 * fusion_investigate / fusion_research: these schemas describe what a caller may send; the
 * daemon still normalises with tool-input.ts, whose hand-written messages are the contract's
 * wording (a test checks that both accept and refuse the same documents). research_run and
 * web_crawl reuse the research-run create body, so their limits are the research limits.
 */
import { z } from 'zod';
import { DELIVERY_MODES } from './api.js';
import { ResearchCreateBodySchema } from './research.js';

/** Non-empty after trimming: JSON Schema can say "contains a non-space character". */
const text = (description: string): z.ZodString => z.string().regex(/\S/u, 'must not be blank').describe(description);
const textList = (description: string): z.ZodArray<z.ZodString> =>
  z.array(z.string().regex(/\S/u, 'must not be blank').describe('Non-empty string; trimmed.')).describe(description);

const investigateShape = {
  objective: text('What to find out. Non-empty; trimmed.'),
  background: textList('Facts the investigators should know. Array of non-empty strings.'),
  deliverable: text('What the answer must contain. Non-empty; trimmed.'),
  scope: textList('Optional: where to look.').optional(),
  constraints: textList('Optional: rules the answer must respect.').optional(),
};

export const InvestigateToolInputSchema = z.object(investigateShape).strict();

export const ResearchToolInputSchema = z
  .object({
    ...investigateShape,
    sources: z
      .array(
        z
          .object({
            url: text('Public http(s) URL to fetch exactly; targeted URL fetch only, not web search. No credentials, tokens, secrets, private data, or repository content in URLs.'),
            purpose: text('Why this source is needed.'),
          })
          .strict(),
      )
      .min(1)
      .describe('The pages to read: at least one; canonical URLs must be unique.'),
  })
  .strict();

const taskId = z.string().regex(/\S/u, 'must not be blank').describe('The task id from the receipt.');

export const BgResultInputSchema = z
  .object({
    taskId,
    delivery: z.enum(DELIVERY_MODES).optional().describe('auto (default): inline up to 49152 bytes, else by reference.'),
  })
  .strict();

export const BgStatusInputSchema = z.object({ taskId }).strict();
export const BgCancelInputSchema = z.object({ taskId }).strict();

/** The research API's Idempotency-Key rule: 1–255 visible ASCII characters. */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/u;

const createShape = ResearchCreateBodySchema.shape;

export const ResearchRunInputSchema = z
  .object({
    query: createShape.query.describe('What the run is about (1–2000 characters); names the stored document.'),
    sourceUrls: createShape.sourceUrls.describe('Absolute http(s) URLs to start from (1–20); links are followed within the limits.'),
    limits: createShape.limits.describe('Optional crawl limits; each omitted key takes its maximum.'),
    idempotencyKey: z
      .string()
      .regex(IDEMPOTENCY_KEY_PATTERN, 'must be 1–255 visible ASCII characters')
      .describe('Required. The same key with the same payload returns the same run instead of starting another.'),
    confirm: z.literal(true).describe('Required: true. A research run is durable and fetches from the web; confirm that you mean it.'),
  })
  .strict();

const runId = z.string().regex(/\S/u, 'must not be blank').describe('The research run id (run.id in the research_run reply).');

/** research_get: a run's status and, once it succeeded, its Markdown document. */
export const ResearchGetInputSchema = z
  .object({
    runId,
    document: z.boolean().optional().describe('Include the document of a succeeded run (default true); false for the status only.'),
  })
  .strict();

/** research_snapshots: the pages a run stored; their text only when asked for. */
export const ResearchSnapshotsInputSchema = z
  .object({
    runId,
    content: z.boolean().optional().describe('Include each page text (default false: URL, status, type, bytes and digest only).'),
  })
  .strict();

/** research_list: the workspace's runs, newest first, one page at a time. */
export const ResearchListInputSchema = z
  .object({
    limit: z.number().int().min(1).max(100).optional().describe('Runs per page, 1–100 (default 20).'),
    cursor: z.string().regex(/\S/u, 'must not be blank').optional().describe('The nextCursor of the previous page; omit for the newest runs.'),
  })
  .strict();

/** The optional repository of a task tool: an absolute path inside a root `fusion mcp` was started with. */
export const McpRepoArgument = z
  .string()
  .regex(/^\//u, 'must be an absolute path')
  .describe('Optional: the repository to work on, an absolute path inside one of the roots this server was started with (fusion mcp --root DIR…). Default: the server\'s --repo.');

export const WebReadInputSchema = z
  .object({
    url: createShape.sourceUrls.element.describe('One public http(s) URL, read through the egress guard with the research profile (no credentials in URLs).'),
  })
  .strict();

export const WebCrawlInputSchema = z
  .object({
    query: createShape.query.describe('What the crawl is for (1–2000 characters); heads the returned Markdown.'),
    sourceUrls: createShape.sourceUrls.describe('Absolute http(s) URLs to start from (1–20); links are followed within the limits.'),
    limits: createShape.limits.describe('Optional crawl limits (the research limits); each omitted key takes its maximum.'),
  })
  .strict();

/** web_search: the query and how many results (the provider's answer is capped at this). */
export const WebSearchInputSchema = z
  .object({
    query: z.string().regex(/\S/u, 'must not be blank').max(400).describe('What to search the web for (1–400 characters), sent to the configured search provider.'),
    count: z.number().int().min(1).max(20).optional().describe('Results wanted, 1–20 (default 10).'),
  })
  .strict();

export type InvestigateToolInput = z.infer<typeof InvestigateToolInputSchema>;
export type ResearchToolInput = z.infer<typeof ResearchToolInputSchema>;
export type ResearchRunInput = z.infer<typeof ResearchRunInputSchema>;
export type ResearchGetInput = z.infer<typeof ResearchGetInputSchema>;
export type ResearchSnapshotsInput = z.infer<typeof ResearchSnapshotsInputSchema>;
export type ResearchListInput = z.infer<typeof ResearchListInputSchema>;
export type WebReadInput = z.infer<typeof WebReadInputSchema>;
export type WebCrawlInput = z.infer<typeof WebCrawlInputSchema>;
export type WebSearchInput = z.infer<typeof WebSearchInputSchema>;
