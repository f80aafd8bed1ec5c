import { describe, expect, it } from 'vitest';
import { OUTPUT_CAPS } from '../../../../src/contracts/constants.js';
import { summaryClaim } from '../../../../src/models/builtin/citations.js';
import { BUILTIN_STRATEGIES, createBuiltinProvider } from '../../../../src/models/builtin/index.js';
import { MAX_TOOL_CALLS } from '../../../../src/models/builtin/strategy.js';
import { COMPRESSION_PROMPT } from '../../../../src/contracts/prompts.js';
import { checkCitations, FIXTURE_ROOT, investigateInput, IPADDR_ROOT, runCandidate } from './harness.js';

const CASES = [
  {
    name: 'ipaddr.js (third-party package)',
    root: IPADDR_ROOT,
    args: { objective: 'Find where IPv4 CIDR ranges are parsed', background: [], deliverable: 'Name the function and the file' },
    file: 'lib/ipaddr.js',
    line: 'ipaddr.IPv4.parseCIDR = function (string) {',
  },
  {
    name: 'calc-lang fixture',
    root: FIXTURE_ROOT,
    args: { objective: 'Find where numeric literals are tokenized', background: ['A small calculator language'], deliverable: 'The function that reads them' },
    file: 'src/lexer/tokenizer.js',
    line: 'function readNumericLiteral(source, start) {',
  },
] as const;

function toolNames(calls: readonly string[]): string[] {
  return calls.map((c) => c.slice(0, c.indexOf('(')));
}

describe.each(CASES)('builtin candidates on $name', ({ root, args, file, line }) => {
  const input = investigateInput(root, args);

  it('each strategy cites real lines whose quotes equal the file text and names the right file', async () => {
    for (const strategy of BUILTIN_STRATEGIES) {
      const run = await runCandidate(createBuiltinProvider(strategy), root, input);
      const checks = checkCitations(root, run.answer);
      expect(checks.length, strategy).toBeGreaterThan(0);
      expect(checks.filter((c) => c.status !== 'verified'), strategy).toEqual([]);
      expect(summaryClaim(run.answer), strategy).toBe(file);
      expect(run.calls.length, strategy).toBeLessThanOrEqual(MAX_TOOL_CALLS);
      // The answer first: the most likely file and its key line, cited and quoted; then the findings.
      expect(run.answer).toMatch(new RegExp(`^## Summary\\n\\nThe most likely file is \`${file.replace(/[.*+?^${}()|[\]\\/]/gu, '\\$&')}\`[^\\n]*\\n\\n- \`[^\`]+:\\d+\`\\n  > `, 'u'));
      expect(run.answer.indexOf('## Summary')).toBeLessThan(run.answer.indexOf('## Findings'));
      expect(Buffer.byteLength(JSON.stringify(run.answer))).toBeLessThan(OUTPUT_CAPS.candidateBytes);
    }
  });

  it('the key line is found by the definition and content strategies', async () => {
    for (const strategy of ['content-search', 'definition-search'] as const) {
      const run = await runCandidate(createBuiltinProvider(strategy), root, input);
      expect(run.answer, strategy).toContain(`  > \`${line}\``);
    }
  });

  it('the three strategies issue different tool sequences', async () => {
    const runs = await Promise.all(BUILTIN_STRATEGIES.map((s) => runCandidate(createBuiltinProvider(s), root, input)));
    const [content, path, definition] = runs.map((r) => r.calls) as [string[], string[], string[]];
    expect(new Set([content.join('\n'), path.join('\n'), definition.join('\n')]).size).toBe(3);
    // content: one grep per term and one listing of the files (to scale the term counts), then
    // reads; path: ls + name globs first; definition: definition patterns.
    expect(toolNames(content)[0]).toBe('grep');
    expect(content.filter((c) => c.startsWith('find('))).toEqual(['find({"pattern":"*","type":"file","max_results":2000})']);
    expect(toolNames(path).slice(0, 2)).toEqual(['ls', 'find']);
    expect(path.some((c) => c.startsWith('find(') && c.includes('**/*['))).toBe(true);
    expect(definition[0]).toContain('function|class');
    expect(toolNames(definition)).not.toContain('find');
  });

  it('is deterministic: same input gives byte-identical calls and answers', async () => {
    for (const strategy of BUILTIN_STRATEGIES) {
      const first = await runCandidate(createBuiltinProvider(strategy), root, input);
      const second = await runCandidate(createBuiltinProvider(strategy), root, input);
      expect(second.calls).toEqual(first.calls);
      expect(second.answer).toBe(first.answer);
    }
  });
});

describe('builtin candidate turn mechanics', () => {
  const input = investigateInput(IPADDR_ROOT, CASES[0].args);

  it('is stateless: replaying a transcript gives the identical next turn', async () => {
    const provider = createBuiltinProvider('content-search');
    const run = await runCandidate(provider, IPADDR_ROOT, input);
    const first = run.messages[2]?.tool_calls?.length ?? 0; // the greps and the file listing
    expect(first).toBeGreaterThan(1);
    const partial = run.messages.slice(0, 2 + 1 + first); // system, user, assistant(first batch), its results
    const tools = [{ name: 'read', description: '', parameters: {} }, { name: 'grep', description: '', parameters: {} }, { name: 'find', description: '', parameters: {} }];
    const a = await provider.complete({ role: 'candidate', taskId: 't', messages: partial, tools });
    const b = await createBuiltinProvider('content-search').complete({ role: 'candidate', taskId: 't', messages: partial, tools });
    expect(a).toEqual(b);
    expect(a.stopReason).toBe('tool_calls');
    expect(a.toolCalls.map((c) => c.id)).toEqual([`call_${first + 1}`, `call_${first + 2}`, `call_${first + 3}`]);
    expect(a.toolCalls.every((c) => c.name === 'read')).toBe(true);
  });

  it('reports provider identity and usage estimates', async () => {
    const provider = createBuiltinProvider('path-search');
    expect(provider.id).toBe('builtin:path-search');
    expect(provider.engine).toBe('builtin');
    const run = await runCandidate(provider, IPADDR_ROOT, input);
    const last = await provider.complete({ role: 'candidate', taskId: 't', messages: run.messages, tools: [] });
    expect(last.model).toBe('builtin:path-search');
    expect(last.stopReason).toBe('stop');
    // A turn offering no tools answers from the transcript it has.
    expect(last.content).toBe(run.answer);
    expect(last.usage.inputTokens).toBeGreaterThan(100);
    expect(last.usage.outputTokens).toBe(Math.ceil(Buffer.byteLength(last.content) / 4));
  });

  it('handles tool errors: failed reads are reported, not cited', async () => {
    const run = await runCandidate(createBuiltinProvider('content-search'), IPADDR_ROOT, input, undefined, (name) =>
      name === 'read' ? { ok: false, error: 'read: lib/ipaddr.js is not a regular file' } : undefined,
    );
    expect(run.answer).toContain('## Not verified');
    expect(run.answer).toContain('A read call failed: read: lib/ipaddr.js is not a regular file');
    expect(checkCitations(IPADDR_ROOT, run.answer).every((c) => c.status === 'verified')).toBe(true);
  });

  it('says what it could not verify when nothing matches', async () => {
    const none = investigateInput(IPADDR_ROOT, { objective: 'Find the zqxwv flurbification handler', background: [], deliverable: 'its location' });
    for (const strategy of BUILTIN_STRATEGIES) {
      const run = await runCandidate(createBuiltinProvider(strategy), IPADDR_ROOT, none);
      expect(run.answer, strategy).toContain('## Not verified');
      expect(checkCitations(IPADDR_ROOT, run.answer), strategy).toEqual([]);
    }
  });

  it('the compression turn shortens the previous answer without tool calls and keeps the findings', async () => {
    const provider = createBuiltinProvider('definition-search');
    const run = await runCandidate(provider, IPADDR_ROOT, input);
    const padded = `${run.answer}\n${'Filler paragraph that adds nothing.\n'.repeat(40)}`;
    const msgs = [...run.messages, { role: 'assistant' as const, content: padded }, { role: 'user' as const, content: COMPRESSION_PROMPT }];
    const res = await provider.complete({ role: 'candidate', taskId: 't', messages: msgs, tools: [] });
    expect(res.toolCalls).toEqual([]);
    expect(res.content.length).toBeLessThan(padded.length);
    expect(res.content).not.toContain('Filler paragraph');
    expect(checkCitations(IPADDR_ROOT, res.content)).toEqual(checkCitations(IPADDR_ROOT, run.answer));
  });
});
