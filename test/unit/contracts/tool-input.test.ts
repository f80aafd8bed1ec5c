import { describe, it, expect } from 'vitest';
import {
  InvestigateArgsSchema,
  ResearchArgsSchema,
  normalizeToolInput,
} from '../../../src/contracts/tool-input.js';
import { FusionError } from '../../../src/errors.js';

type Workflow = 'investigate' | 'research';

function errorOf(workflow: Workflow, args: unknown): FusionError {
  try {
    normalizeToolInput(workflow, args);
  } catch (error) {
    expect(error).toBeInstanceOf(FusionError);
    expect((error as FusionError).code).toBe('invalid_input');
    return error as FusionError;
  }
  throw new Error('expected normalizeToolInput to throw');
}

function messageOf(workflow: Workflow, args: unknown): string {
  return errorOf(workflow, args).message;
}

const BASE = { objective: 'o', background: [], deliverable: 'd' };
const SOURCE = { url: 'https://example.com/a', purpose: 'p' };
const RESEARCH = { ...BASE, sources: [SOURCE] };

describe('docs/behaviour.md#a1 arguments must be an object', () => {
  it.each([null, undefined, [], [BASE], 'x', 42, true])('%j', (args) => {
    expect(messageOf('investigate', args)).toBe('fusion_investigate arguments must be an object');
    expect(messageOf('research', args)).toBe('fusion_research arguments must be an object');
  });

  it('reports the tool and no path', () => {
    expect(errorOf('research', null).details).toEqual({ tool: 'fusion_research' });
  });
});

describe('docs/behaviour.md#a2 closed schema', () => {
  it('reports unknown keys before missing ones', () => {
    expect(messageOf('investigate', { prompt: 'x' })).toBe('fusion_investigate contains unsupported key(s): prompt');
  });

  it('lists unknown keys sorted, whatever the caller order', () => {
    expect(messageOf('investigate', { ...BASE, zeta: 1, alpha: 2, sources: [] })).toBe(
      'fusion_investigate contains unsupported key(s): alpha, sources, zeta',
    );
    expect(errorOf('investigate', { ...BASE, zeta: 1, alpha: 2 }).details).toEqual({
      tool: 'fusion_investigate',
      keys: ['alpha', 'zeta'],
    });
  });

  it('lists missing keys in declaration order', () => {
    expect(messageOf('investigate', {})).toBe('fusion_investigate missing required key(s): objective, background, deliverable');
    expect(messageOf('research', {})).toBe('fusion_research missing required key(s): objective, background, deliverable, sources');
    expect(messageOf('research', BASE)).toBe('fusion_research missing required key(s): sources');
    expect(messageOf('investigate', { background: [] })).toBe('fusion_investigate missing required key(s): objective, deliverable');
  });

  it('treats inherited properties as missing', () => {
    const args = Object.create({ objective: 'o' }) as Record<string, unknown>;
    args.background = [];
    args.deliverable = 'd';
    expect(messageOf('investigate', args)).toBe('fusion_investigate missing required key(s): objective');
  });

  it('rejects a JSON __proto__ key as unsupported', () => {
    const args: unknown = JSON.parse('{"objective":"o","background":[],"deliverable":"d","__proto__":{"x":1}}');
    expect(messageOf('investigate', args)).toBe('fusion_investigate contains unsupported key(s): __proto__');
  });
});

describe('docs/behaviour.md#a3 strings and arrays', () => {
  it.each([
    [{ ...BASE, objective: 1 }, 'fusion_investigate.objective must be a string', 'objective'],
    [{ ...BASE, objective: null }, 'fusion_investigate.objective must be a string', 'objective'],
    [{ ...BASE, objective: ' \n\t ' }, 'fusion_investigate.objective must not be blank', 'objective'],
    [{ ...BASE, deliverable: ['d'] }, 'fusion_investigate.deliverable must be a string', 'deliverable'],
    [{ ...BASE, deliverable: '' }, 'fusion_investigate.deliverable must not be blank', 'deliverable'],
    [{ ...BASE, background: 'text' }, 'fusion_investigate.background must be an array of strings', 'background'],
    [{ ...BASE, background: undefined }, 'fusion_investigate.background must be an array of strings', 'background'],
    [{ ...BASE, background: ['a', 2] }, 'fusion_investigate.background[1] must be a string', 'background[1]'],
    [{ ...BASE, background: ['a', '  '] }, 'fusion_investigate.background[1] must not be blank', 'background[1]'],
    [{ ...BASE, scope: 'x' }, 'fusion_investigate.scope must be an array of strings', 'scope'],
    [{ ...BASE, scope: null }, 'fusion_investigate.scope must be an array of strings', 'scope'],
    [{ ...BASE, scope: [''] }, 'fusion_investigate.scope[0] must not be blank', 'scope[0]'],
    [{ ...BASE, constraints: {} }, 'fusion_investigate.constraints must be an array of strings', 'constraints'],
    [{ ...BASE, constraints: ['ok', {}] }, 'fusion_investigate.constraints[1] must be a string', 'constraints[1]'],
  ])('%j → %s', (args, message, path) => {
    const error = errorOf('investigate', args);
    expect(error.message).toBe(message);
    expect(error.details).toEqual({ tool: 'fusion_investigate', path });
  });

  it('uses the research tool name in research labels', () => {
    expect(messageOf('research', { ...RESEARCH, objective: 3 })).toBe('fusion_research.objective must be a string');
    expect(messageOf('research', { ...RESEARCH, scope: [' '] })).toBe('fusion_research.scope[0] must not be blank');
  });

  it('checks fields in order objective, background, deliverable, scope, constraints, sources', () => {
    const allBad = { objective: 1, background: 1, deliverable: 1, scope: 1, constraints: 1, sources: 1 };
    const expected = [
      ['objective', 'fusion_research.objective must be a string'],
      ['background', 'fusion_research.background must be an array of strings'],
      ['deliverable', 'fusion_research.deliverable must be a string'],
      ['scope', 'fusion_research.scope must be an array of strings'],
      ['constraints', 'fusion_research.constraints must be an array of strings'],
      ['sources', 'fusion_research.sources must be an array'],
    ] as const;
    const args: Record<string, unknown> = { ...allBad };
    for (const [field, message] of expected) {
      expect(messageOf('research', args)).toBe(message);
      args[field] = field === 'objective' || field === 'deliverable' ? 'x' : field === 'sources' ? [SOURCE] : [];
    }
    expect(() => normalizeToolInput('research', args)).not.toThrow();
  });

  it('allows background: [] and defaults scope/constraints to []', () => {
    expect(normalizeToolInput('investigate', BASE)).toEqual({ ...BASE, scope: [], constraints: [] });
    expect(normalizeToolInput('investigate', { ...BASE, scope: undefined, constraints: [] })).toEqual({
      ...BASE,
      scope: [],
      constraints: [],
    });
  });

  it('trims every string', () => {
    expect(
      normalizeToolInput('investigate', {
        objective: '\t o ',
        background: [' b1', 'b2\n'],
        deliverable: ' d ',
        scope: [' s '],
        constraints: ['  c'],
      }),
    ).toEqual({ objective: 'o', background: ['b1', 'b2'], deliverable: 'd', scope: ['s'], constraints: ['c'] });
  });
});

describe('docs/behaviour.md#a4 vector', () => {
  it('normalises the SPEC example exactly', () => {
    const result = normalizeToolInput('investigate', {
      objective: ' find risk ',
      background: [' repo changed '],
      deliverable: ' report ',
    });
    expect(result).toStrictEqual({
      objective: 'find risk',
      background: ['repo changed'],
      deliverable: 'report',
      scope: [],
      constraints: [],
    });
    expect(Object.keys(result)).toEqual(['objective', 'background', 'deliverable', 'scope', 'constraints']);
  });

  it('does not mutate the caller arguments', () => {
    const args = { objective: ' x ', background: [' y '], deliverable: ' z ' };
    const copy = structuredClone(args);
    normalizeToolInput('investigate', args);
    expect(args).toEqual(copy);
  });
});

describe('docs/behaviour.md#a5 research sources', () => {
  it.each([
    [{ ...BASE, sources: 'https://example.com/' }, 'fusion_research.sources must be an array', 'sources'],
    [{ ...BASE, sources: {} }, 'fusion_research.sources must be an array', 'sources'],
    [{ ...BASE, sources: [] }, 'fusion_research.sources must not be empty', 'sources'],
    [{ ...BASE, sources: [null] }, 'fusion_research.sources[0] must be an object', 'sources[0]'],
    [{ ...BASE, sources: [SOURCE, [SOURCE]] }, 'fusion_research.sources[1] must be an object', 'sources[1]'],
    [{ ...BASE, sources: ['https://example.com/'] }, 'fusion_research.sources[0] must be an object', 'sources[0]'],
    [{ ...BASE, sources: [{ ...SOURCE, why: 'x', extra: 1 }] }, 'fusion_research.sources[0] contains unsupported key(s): extra, why', 'sources[0]'],
    [{ ...BASE, sources: [{ url: SOURCE.url }] }, 'fusion_research.sources[0] missing required key(s): purpose', 'sources[0]'],
    [{ ...BASE, sources: [{}] }, 'fusion_research.sources[0] missing required key(s): url, purpose', 'sources[0]'],
    [{ ...BASE, sources: [{ url: 1, purpose: 'p' }] }, 'fusion_research.sources[0].url must be a string', 'sources[0].url'],
    [{ ...BASE, sources: [{ url: '  ', purpose: 'p' }] }, 'fusion_research.sources[0].url must not be blank', 'sources[0].url'],
    [{ ...BASE, sources: [{ url: SOURCE.url, purpose: 2 }] }, 'fusion_research.sources[0].purpose must be a string', 'sources[0].purpose'],
    [{ ...BASE, sources: [{ url: SOURCE.url, purpose: ' ' }] }, 'fusion_research.sources[0].purpose must not be blank', 'sources[0].purpose'],
  ])('%j → %s', (args, message, path) => {
    const error = errorOf('research', args);
    expect(error.message).toBe(message);
    expect(error.details).toMatchObject({ tool: 'fusion_research', path });
  });

  it.each([
    ['http://localhost/', 'fusion research source URL must be public, not localhost/metadata'],
    ['http://169.254.169.254/', 'fusion research source URL must be public, not private/reserved'],
    ['http://127.1/', 'fusion research source URL must be public, not private/reserved'],
    ['ftp://example.com/', 'fusion research source URL must use http or https'],
    ['https://u:p@example.com/', 'fusion research source URL must not contain credentials'],
    ['nope', 'fusion research declared source URL is malformed: Invalid URL'],
    ['https://a b.example/', 'fusion research source URL contains whitespace or control characters'],
  ])('url %j → must be a declared public http(s) URL: <inner>', (url, inner) => {
    const error = errorOf('research', { ...BASE, sources: [SOURCE, { url, purpose: 'p' }] });
    expect(error.message).toBe(`fusion_research.sources[1].url must be a declared public http(s) URL: ${inner}`);
    expect(error.details).toEqual({ tool: 'fusion_research', path: 'sources[1].url' });
  });

  it('trims the url before canonicalising it', () => {
    expect(normalizeToolInput('research', { ...BASE, sources: [{ url: '  HTTPS://Example.COM/a#frag\n', purpose: ' p ' }] }).sources).toEqual([
      { url: 'https://example.com/a', purpose: 'p' },
    ]);
  });

  it('stores the canonical url (HTTPS://Example.COM/a#frag → https://example.com/a)', () => {
    const result = normalizeToolInput('research', {
      ...BASE,
      sources: [
        { url: 'HTTPS://Example.COM/a#frag', purpose: ' why ' },
        { url: 'HTTPS://Example.COM:443/a?q=1#frag', purpose: 'query' },
      ],
    });
    expect(result).toStrictEqual({
      objective: 'o',
      background: [],
      deliverable: 'd',
      scope: [],
      constraints: [],
      sources: [
        { url: 'https://example.com/a', purpose: 'why' },
        { url: 'https://example.com/a?q=1', purpose: 'query' },
      ],
    });
  });

  it('rejects duplicates by canonical URL, naming the first index', () => {
    const error = errorOf('research', {
      ...BASE,
      sources: [
        { url: 'https://example.com/a', purpose: 'p' },
        { url: 'https://other.example/', purpose: 'p' },
        { url: 'https://example.com./a', purpose: 'q' },
      ],
    });
    expect(error.message).toBe('fusion_research.sources[2].url duplicates canonical URL from sources[0]: https://example.com/a');
    expect(error.details).toEqual({ tool: 'fusion_research', path: 'sources[2].url' });
    expect(messageOf('research', { ...BASE, sources: [SOURCE, { url: 'HTTPS://EXAMPLE.com:443/a#x', purpose: 'q' }] })).toBe(
      'fusion_research.sources[1].url duplicates canonical URL from sources[0]: https://example.com/a',
    );
  });

  it('checks url before purpose within one source', () => {
    expect(messageOf('research', { ...BASE, sources: [{ url: 'http://localhost/', purpose: ' ' }] })).toMatch(/^fusion_research\.sources\[0\]\.url /);
  });
});

describe('output schemas', () => {
  it('accept normalised output', () => {
    expect(InvestigateArgsSchema.parse(normalizeToolInput('investigate', BASE))).toEqual({ ...BASE, scope: [], constraints: [] });
    const research = normalizeToolInput('research', RESEARCH);
    expect(ResearchArgsSchema.parse(research)).toEqual(research);
  });

  it('are closed and reject un-normalised values', () => {
    const normalised = { ...BASE, scope: [], constraints: [] };
    expect(InvestigateArgsSchema.safeParse({ ...normalised, extra: 1 }).success).toBe(false);
    expect(InvestigateArgsSchema.safeParse({ ...normalised, objective: ' o ' }).success).toBe(false);
    expect(InvestigateArgsSchema.safeParse({ ...normalised, background: [''] }).success).toBe(false);
    expect(InvestigateArgsSchema.safeParse(BASE).success).toBe(false);
    const research = { ...normalised, sources: [SOURCE] };
    expect(ResearchArgsSchema.safeParse(research).success).toBe(true);
    expect(ResearchArgsSchema.safeParse({ ...research, sources: [] }).success).toBe(false);
    expect(ResearchArgsSchema.safeParse({ ...research, sources: [{ ...SOURCE, url: 'HTTPS://example.com/a' }] }).success).toBe(false);
    expect(ResearchArgsSchema.safeParse({ ...research, sources: [{ ...SOURCE, url: 'http://localhost/' }] }).success).toBe(false);
    expect(ResearchArgsSchema.safeParse({ ...research, sources: [SOURCE, SOURCE] }).success).toBe(false);
    expect(ResearchArgsSchema.safeParse({ ...research, sources: [{ ...SOURCE, extra: 1 }] }).success).toBe(false);
  });
});
