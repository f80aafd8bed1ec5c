import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CANDIDATE_TOOLS } from '../../../../src/contracts/constants.js';
import { runTool, TOOL_SPECS, TOOLS } from '../../../../sandbox/tools/index.js';
import { FIXTURE_REPO } from './helpers.js';

describe('tool registry', () => {
  it('has exactly the candidate tools, each with a spec', () => {
    expect(Object.keys(TOOLS).sort()).toEqual([...CANDIDATE_TOOLS].sort());
    expect(TOOL_SPECS.map((s) => s.name).sort()).toEqual([...CANDIDATE_TOOLS].sort());
  });

  it('specs are closed JSON-schema objects whose required keys exist', () => {
    for (const spec of TOOL_SPECS) {
      expect(spec.description.length).toBeGreaterThan(20);
      expect(spec.parameters.type).toBe('object');
      expect(spec.parameters.additionalProperties).toBe(false);
      for (const key of spec.parameters.required) expect(Object.keys(spec.parameters.properties)).toContain(key);
      expect(JSON.parse(JSON.stringify(spec))).toEqual(spec);
    }
  });

  it('spec properties are exactly what the validators accept', async () => {
    for (const spec of TOOL_SPECS) {
      const result = await TOOLS[spec.name](FIXTURE_REPO, { bogus_key: 1 });
      expect(result).toEqual({ ok: false, error: `${spec.name} contains unsupported key(s): bogus_key` });
      // Every declared property is known to the validator (no "unsupported key" error).
      const args = Object.fromEntries(Object.keys(spec.parameters.properties).map((k) => [k, null]));
      const res = await TOOLS[spec.name](FIXTURE_REPO, args);
      if (!res.ok) expect(res.error).not.toMatch(/unsupported/);
    }
  });

  it('runTool dispatches and refuses unknown tools', async () => {
    expect(await runTool('bash', FIXTURE_REPO, {})).toEqual({ ok: false, error: 'unknown tool: "bash"' });
    expect(await runTool('ls', FIXTURE_REPO, { path: 'docs' })).toEqual({ ok: true, text: 'guide.md\nnotes.txt' });
  });
});

describe('sandbox import rule (docs/architecture.md#rule-4)', () => {
  it('tool code imports only node builtins and sibling files at run time', async () => {
    const toolsDir = fileURLToPath(new URL('../../../../sandbox/tools/', import.meta.url));
    const files = (await readdir(toolsDir)).filter((f) => f.endsWith('.ts')).map((f) => `${toolsDir}${f}`);
    files.push(fileURLToPath(new URL('../../../../sandbox/path-confine.ts', import.meta.url)));
    for (const file of files) {
      const source = await readFile(file, 'utf8');
      for (const m of source.matchAll(/^(import|export)\s+(type\s+)?[^;]*?from\s+'([^']+)'/gms)) {
        if (m[2] !== undefined) continue; // type-only: erased at compile time
        const spec = m[3] as string;
        expect(spec.startsWith('node:') || spec.startsWith('./') || spec === '../path-confine.js', `${file}: ${spec}`).toBe(true);
      }
    }
  });
});
