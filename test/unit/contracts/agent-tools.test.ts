/**
 * The MCP tool schemas are generated from the zod contracts; these tests fail when a contract
 * and what agents are told disagree:
 *   - every listed tool's input schema is its contract's JSON Schema, and every contract is listed;
 *   - the fusion_* input contracts accept and refuse the same documents as the normaliser the
 *     daemon runs (tool-input.ts, whose messages are the contract's wording), over a corpus of
 *     valid and invalid documents — except what JSON Schema cannot say (URL policy, duplicate
 *     canonical URLs), where the schema may only be wider;
 *   - research_run and web_crawl carry the research-run create body and the research limits.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { FusionError } from '../../../src/errors.js';
import { normalizeToolInput } from '../../../src/contracts/tool-input.js';
import { ResearchCreateBodySchema, RESEARCH_MAX_SOURCE_URLS, RESEARCH_QUERY_MAX_CHARS } from '../../../src/contracts/research.js';
import { RESEARCH_LIMIT_MAXIMA } from '../../../src/contracts/research-limits.js';
import { InvestigateToolInputSchema, ResearchRunInputSchema, ResearchToolInputSchema, WebCrawlInputSchema } from '../../../src/contracts/agent-tools.js';
import { MCP_TOOLS, TOOL_CONTRACTS, toolInputSchema } from '../../../src/mcp/tool-schemas.js';

const BASE = { objective: 'o', background: ['b'], deliverable: 'd' };
const SOURCE = { url: 'https://example.com/a', purpose: 'p' };

const investigateCorpus: unknown[] = [
  BASE,
  { ...BASE, scope: ['s'], constraints: ['c'] },
  { ...BASE, background: [] },
  { ...BASE, scope: [] },
  { objective: ' o ', background: [' b '], deliverable: ' d ' },
  {},
  null,
  [],
  'text',
  { objective: 'o' },
  { ...BASE, extra: 1 },
  { ...BASE, objective: '' },
  { ...BASE, objective: '   ' },
  { ...BASE, objective: 3 },
  { ...BASE, background: 'b' },
  { ...BASE, background: [''] },
  { ...BASE, background: ['  '] },
  { ...BASE, background: [1] },
  { ...BASE, scope: 's' },
  { ...BASE, constraints: [' '] },
  { ...BASE, deliverable: null },
  { ...BASE, sources: [SOURCE] },
];

const researchCorpus: unknown[] = [
  { ...BASE, sources: [SOURCE] },
  { ...BASE, sources: [SOURCE, { url: 'https://example.org/', purpose: 'q' }] },
  { ...BASE, sources: [] },
  { ...BASE, sources: 'x' },
  { ...BASE },
  { ...BASE, sources: [{ url: 'https://example.com/' }] },
  { ...BASE, sources: [{ ...SOURCE, extra: true }] },
  { ...BASE, sources: [{ ...SOURCE, purpose: ' ' }] },
  { ...BASE, sources: [{ ...SOURCE, url: '' }] },
  { ...BASE, sources: ['https://example.com/'] },
  { ...BASE, sources: [SOURCE], scope: [''] },
];

function normaliserAccepts(workflow: 'investigate' | 'research', doc: unknown): boolean {
  try {
    normalizeToolInput(workflow, doc);
    return true;
  } catch (err) {
    if (err instanceof FusionError && err.code === 'invalid_input') return false;
    throw err;
  }
}

describe('MCP tool schemas are generated from the contracts', () => {
  it('lists every contract once, each with its generated JSON Schema', () => {
    expect(MCP_TOOLS.map((t) => t.name)).toEqual(Object.keys(TOOL_CONTRACTS));
    for (const tool of MCP_TOOLS) {
      // Task tools also take the MCP server's own optional `repo` (removed before the daemon validates).
      const { repo, ...properties } = tool.inputSchema.properties as Record<string, unknown>;
      expect(repo !== undefined).toBe(tool.name === 'fusion_investigate' || tool.name === 'fusion_research');
      expect({ ...tool.inputSchema, properties }).toEqual(toolInputSchema(TOOL_CONTRACTS[tool.name]));
      expect(tool.inputSchema.type).toBe('object');
      expect(tool.inputSchema.additionalProperties).toBe(false);
      expect(tool.description.length).toBeGreaterThan(20);
    }
  });

  it.each([
    ['investigate', InvestigateToolInputSchema, investigateCorpus],
    ['research', ResearchToolInputSchema, [...investigateCorpus, ...researchCorpus]],
  ] as const)('fusion_%s: the input contract and the daemon normaliser agree on every document', (workflow, schema, corpus) => {
    for (const doc of corpus) {
      expect({ doc, accepted: schema.safeParse(doc).success }).toEqual({ doc, accepted: normaliserAccepts(workflow, doc) });
    }
  });

  it('fusion_research: where JSON Schema cannot express the rule (URL policy, duplicates) the contract is only wider', () => {
    for (const sources of [[{ url: 'http://127.0.0.1/', purpose: 'p' }], [SOURCE, SOURCE], [{ url: 'not a url', purpose: 'p' }]]) {
      const doc = { ...BASE, sources };
      expect(normaliserAccepts('research', doc)).toBe(false);
      expect(ResearchToolInputSchema.safeParse(doc).success).toBe(true);
    }
  });

  it('the required keys of the schemas are the normaliser’s required keys', () => {
    expect(toolInputSchema(InvestigateToolInputSchema).required).toEqual(['objective', 'background', 'deliverable']);
    expect(toolInputSchema(ResearchToolInputSchema).required).toEqual(['objective', 'background', 'deliverable', 'sources']);
    expect(() => normalizeToolInput('investigate', {})).toThrow('fusion_investigate missing required key(s): objective, background, deliverable');
    expect(() => normalizeToolInput('research', {})).toThrow('fusion_research missing required key(s): objective, background, deliverable, sources');
  });

  it('research_run and web_crawl carry the research create body and the research limits', () => {
    const createKeys = Object.keys(ResearchCreateBodySchema.shape);
    expect(Object.keys(WebCrawlInputSchema.shape)).toEqual(createKeys);
    expect(Object.keys(ResearchRunInputSchema.shape)).toEqual([...createKeys, 'idempotencyKey', 'confirm']);
    for (const name of ['research_run', 'web_crawl'] as const) {
      const schema = MCP_TOOLS.find((t) => t.name === name)!.inputSchema as any;
      expect(schema.properties.query.maxLength).toBe(RESEARCH_QUERY_MAX_CHARS);
      expect(schema.properties.sourceUrls.maxItems).toBe(RESEARCH_MAX_SOURCE_URLS);
      const maxima = Object.fromEntries(Object.entries(schema.properties.limits.properties as Record<string, { maximum: number }>).map(([k, v]) => [k, v.maximum]));
      expect(maxima).toEqual(RESEARCH_LIMIT_MAXIMA);
      expect(schema.properties.limits.additionalProperties).toBe(false);
    }
    const run = MCP_TOOLS.find((t) => t.name === 'research_run')!.inputSchema as any;
    expect(run.required).toEqual(['query', 'sourceUrls', 'idempotencyKey', 'confirm']);
    expect(run.properties.confirm).toMatchObject({ type: 'boolean', const: true });
    // A body the HTTP contract accepts is a web_crawl input, and research_run adds exactly its two keys.
    const body = { query: 'q', sourceUrls: ['https://example.com/'], limits: { maxDepth: 0 } };
    expect(ResearchCreateBodySchema.safeParse(body).success).toBe(true);
    expect(WebCrawlInputSchema.safeParse(body).success).toBe(true);
    expect(ResearchRunInputSchema.safeParse({ ...body, idempotencyKey: 'k', confirm: true }).success).toBe(true);
    expect(ResearchRunInputSchema.safeParse({ ...body, idempotencyKey: 'k', confirm: false }).success).toBe(false);
    expect(ResearchRunInputSchema.safeParse({ ...body, idempotencyKey: 'has space', confirm: true }).success).toBe(false);
    expect(z.toJSONSchema(ResearchRunInputSchema, { io: 'input' })).toMatchObject({ additionalProperties: false });
  });
});
