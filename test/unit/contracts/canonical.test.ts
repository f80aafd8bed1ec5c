import { describe, it, expect } from 'vitest';
import { createHash } from 'node:crypto';
import {
  CanonicalInputSchema,
  SourcePolicySchema,
  buildCanonicalInput,
  canonicalJson,
  canonicalRequestText,
  sha256Hex,
  sourcePolicy,
} from '../../../src/contracts/canonical.js';
import { normalizeToolInput } from '../../../src/contracts/tool-input.js';
import { FusionError } from '../../../src/errors.js';

/** Independent reference hash, so the tests do not trust sha256Hex to check itself. */
function refSha(text: string): string {
  return createHash('sha256').update(Buffer.from(text, 'utf8')).digest('hex');
}

describe('canonicalJson', () => {
  it('sorts object keys recursively, keeps array order and has no whitespace', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, 1, { z: 0, y: 'x y' }], c: null } })).toBe(
      '{"a":{"c":null,"d":[3,1,{"y":"x y","z":0}]},"b":1}',
    );
  });

  it('does not depend on insertion order', () => {
    const one = { objective: 'o', background: ['b'], nested: { x: 1, y: [true, false] } };
    const two = { nested: { y: [true, false], x: 1 }, background: ['b'], objective: 'o' };
    expect(canonicalJson(one)).toBe(canonicalJson(two));
  });

  it('sorts by UTF-16 code unit and escapes like JSON.stringify', () => {
    expect(canonicalJson({ b: 1, B: 2, é: 3, '10': 4, '9': 5, a: 'quote" \\ \n é 😀' })).toBe(
      '{"10":4,"9":5,"B":2,"a":"quote\\" \\\\ \\n é 😀","b":1,"é":3}',
    );
  });

  it('handles primitives and empty containers', () => {
    expect(canonicalJson('x')).toBe('"x"');
    expect(canonicalJson(0)).toBe('0');
    expect(canonicalJson(-1.5)).toBe('-1.5');
    expect(canonicalJson(true)).toBe('true');
    expect(canonicalJson(null)).toBe('null');
    expect(canonicalJson({})).toBe('{}');
    expect(canonicalJson([])).toBe('[]');
  });

  it('follows JSON.stringify for undefined and toJSON', () => {
    expect(canonicalJson({ a: undefined, b: 1 })).toBe('{"b":1}');
    expect(canonicalJson([undefined, 1])).toBe('[null,1]');
    expect(canonicalJson({ when: new Date(0) })).toBe('{"when":"1970-01-01T00:00:00.000Z"}');
  });

  it('refuses values that are not faithful JSON', () => {
    expect(() => canonicalJson(undefined)).toThrow(TypeError);
    expect(() => canonicalJson({ n: Number.NaN })).toThrow(/non-finite/);
    expect(() => canonicalJson({ n: Infinity })).toThrow(/non-finite/);
    expect(() => canonicalJson({ n: 1n })).toThrow(/bigint/);
    expect(() => canonicalJson({ m: new Map() })).toThrow(/Map/);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow(/cyclic/);
  });

  it('allows the same object twice when it is not a cycle', () => {
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: [shared] })).toBe('{"a":{"x":1},"b":[{"x":1}]}');
  });
});

describe('sha256Hex', () => {
  it('hashes strings as UTF-8 and bytes as is', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sha256Hex(Buffer.from('abc'))).toBe(sha256Hex('abc'));
    expect(sha256Hex(new Uint8Array([0x61, 0x62, 0x63]))).toBe(sha256Hex('abc'));
    expect(sha256Hex('é')).toBe(refSha('é'));
  });
});

const INVESTIGATE_RAW = { objective: ' find risk ', background: [' repo changed '], deliverable: ' report ' };
const INVESTIGATE_TEXT = '{"background":["repo changed"],"constraints":[],"deliverable":"report","objective":"find risk","scope":[]}';

describe('docs/behaviour.md#a6 canonical request text', () => {
  it('is the normalised arguments with sorted keys', () => {
    expect(canonicalRequestText(normalizeToolInput('investigate', INVESTIGATE_RAW))).toBe(INVESTIGATE_TEXT);
  });

  it('is byte-identical for the same request spelled differently', () => {
    const reordered = { deliverable: 'report', background: ['repo changed  '], objective: 'find risk', scope: [], constraints: [] };
    expect(canonicalRequestText(normalizeToolInput('investigate', reordered))).toBe(INVESTIGATE_TEXT);
  });
});

describe('docs/behaviour.md#a7 canonical input', () => {
  it('has exactly the investigate shape, with declared_sources []', () => {
    const args = normalizeToolInput('investigate', INVESTIGATE_RAW);
    const input = buildCanonicalInput({ workflow: 'investigate', cwd: '/repo', args });
    expect(input).toStrictEqual({
      schema_version: 'fusion.fusion-input.v1',
      workflow: 'investigate',
      cwd: '/repo',
      request: {
        source: 'fusion_investigate',
        authority: 'explicit_text',
        text: INVESTIGATE_TEXT,
        sha256: refSha(INVESTIGATE_TEXT),
      },
      context: { kind: 'clean_task', policy_id: 'fusion-clean-task-v1', declared_sources: [] },
    });
    expect(CanonicalInputSchema.parse(input)).toStrictEqual(input);
  });

  it('has the research shape, with hashed declared sources in order', () => {
    const args = normalizeToolInput('research', {
      objective: 'compare docs',
      background: [],
      deliverable: 'summary',
      sources: [
        { url: 'HTTPS://Example.COM/a#frag', purpose: ' primary docs ' },
        { url: 'https://example.org:443/b?x=1&a=2', purpose: 'changelog' },
      ],
    });
    const input = buildCanonicalInput({ workflow: 'research', cwd: '/work/repo', args });
    const text = canonicalJson(args);
    expect(input.request).toStrictEqual({ source: 'fusion_research', authority: 'explicit_text', text, sha256: refSha(text) });
    expect(input.request.text).toBe(
      '{"background":[],"constraints":[],"deliverable":"summary","objective":"compare docs","scope":[],' +
        '"sources":[{"purpose":"primary docs","url":"https://example.com/a"},{"purpose":"changelog","url":"https://example.org/b?x=1&a=2"}]}',
    );
    expect(input.context.declared_sources).toStrictEqual([
      {
        url: 'https://example.com/a',
        canonical_url: 'https://example.com/a',
        purpose: 'primary docs',
        sha256: refSha('https://example.com/a\u0000primary docs'),
      },
      {
        url: 'https://example.org/b?x=1&a=2',
        canonical_url: 'https://example.org/b?x=1&a=2',
        purpose: 'changelog',
        sha256: refSha('https://example.org/b?x=1&a=2\u0000changelog'),
      },
    ]);
    expect(Object.keys(input).sort()).toEqual(['context', 'cwd', 'request', 'schema_version', 'workflow']);
    expect(CanonicalInputSchema.parse(input)).toStrictEqual(input);
  });

  it('is byte-identical for the same request and repository', () => {
    const a = buildCanonicalInput({ workflow: 'investigate', cwd: '/repo', args: normalizeToolInput('investigate', INVESTIGATE_RAW) });
    const b = buildCanonicalInput({
      workflow: 'investigate',
      cwd: '/repo',
      args: normalizeToolInput('investigate', { deliverable: 'report', objective: 'find risk', background: ['repo changed'], scope: [] }),
    });
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    const c = buildCanonicalInput({ workflow: 'investigate', cwd: '/other', args: normalizeToolInput('investigate', INVESTIGATE_RAW) });
    expect(canonicalJson(c)).not.toBe(canonicalJson(a));
    expect(c.request).toStrictEqual(a.request);
  });

  it('lets nothing besides the normalised arguments into the text', () => {
    const args = { ...normalizeToolInput('investigate', INVESTIGATE_RAW), session: 'secret history' };
    expect(() => buildCanonicalInput({ workflow: 'investigate', cwd: '/repo', args })).toThrow(FusionError);
    try {
      buildCanonicalInput({ workflow: 'investigate', cwd: '/repo', args });
    } catch (error) {
      expect((error as FusionError).code).toBe('invalid_input');
      expect((error as FusionError).message).toMatch(/^fusion_investigate arguments are not normalised/);
    }
  });

  it('rejects a workflow/arguments mismatch and an empty cwd', () => {
    const investigate = normalizeToolInput('investigate', INVESTIGATE_RAW);
    const research = normalizeToolInput('research', { ...INVESTIGATE_RAW, sources: [{ url: 'https://example.com/', purpose: 'p' }] });
    expect(() => buildCanonicalInput({ workflow: 'research', cwd: '/repo', args: investigate })).toThrow(FusionError);
    expect(() => buildCanonicalInput({ workflow: 'investigate', cwd: '/repo', args: research })).toThrow(FusionError);
    expect(() => buildCanonicalInput({ workflow: 'investigate', cwd: '', args: investigate })).toThrow(/cwd/);
  });

  it('CanonicalInputSchema is closed and checks the hashes', () => {
    const input = buildCanonicalInput({ workflow: 'investigate', cwd: '/repo', args: normalizeToolInput('investigate', INVESTIGATE_RAW) });
    expect(CanonicalInputSchema.safeParse({ ...input, extra: 1 }).success).toBe(false);
    expect(CanonicalInputSchema.safeParse({ ...input, request: { ...input.request, session: 'x' } }).success).toBe(false);
    expect(CanonicalInputSchema.safeParse({ ...input, request: { ...input.request, sha256: refSha('other') } }).success).toBe(false);
    expect(CanonicalInputSchema.safeParse({ ...input, request: { ...input.request, source: 'fusion_research' } }).success).toBe(false);
    expect(CanonicalInputSchema.safeParse({ ...input, schema_version: 'pi-background-tasks.fusion-input.v1' }).success).toBe(false);
    const badSource = { url: 'https://e.com/', canonical_url: 'https://e.com/', purpose: 'p', sha256: refSha('x') };
    expect(
      CanonicalInputSchema.safeParse({ ...input, workflow: 'research', request: { ...input.request, source: 'fusion_research' }, context: { ...input.context, declared_sources: [badSource] } }).success,
    ).toBe(false);
  });
});

describe('sourcePolicy', () => {
  const args = normalizeToolInput('research', {
    objective: 'o',
    background: [],
    deliverable: 'd',
    sources: [
      { url: 'https://b.example/', purpose: 'second' },
      { url: 'https://a.example/', purpose: 'first' },
    ],
  });
  const input = buildCanonicalInput({ workflow: 'research', cwd: '/repo', args });

  it('lists the declared sources and a root hash over the sorted source hashes', () => {
    const policy = sourcePolicy(input);
    const hashes = [refSha('https://b.example/\u0000second'), refSha('https://a.example/\u0000first')];
    expect(policy).toStrictEqual({
      schema_version: 'fusion.fusion-source-policy.v1',
      sources: [
        { canonical_url: 'https://b.example/', purpose: 'second', sha256: hashes[0] },
        { canonical_url: 'https://a.example/', purpose: 'first', sha256: hashes[1] },
      ],
      root_sha256: refSha(JSON.stringify([...hashes].sort())),
    });
    expect(SourcePolicySchema.parse(policy)).toStrictEqual(policy);
  });

  it('has a root hash independent of declaration order', () => {
    const swapped = buildCanonicalInput({
      workflow: 'research',
      cwd: '/repo',
      args: { ...args, sources: [...args.sources].reverse() },
    });
    expect(sourcePolicy(swapped).root_sha256).toBe(sourcePolicy(input).root_sha256);
  });

  it('is empty for investigate', () => {
    const investigate = buildCanonicalInput({ workflow: 'investigate', cwd: '/repo', args: normalizeToolInput('investigate', INVESTIGATE_RAW) });
    expect(sourcePolicy(investigate)).toStrictEqual({
      schema_version: 'fusion.fusion-source-policy.v1',
      sources: [],
      root_sha256: refSha('[]'),
    });
  });
});
