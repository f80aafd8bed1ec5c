import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const CLI = join(__dirname, '..', '..', '..', 'dist', 'src', 'cli', 'main.js');

function validate(tool: string, input: unknown, env: Record<string, string> = {}): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, 'validate', tool, '-'], { input: typeof input === 'string' ? input : JSON.stringify(input), encoding: 'utf8', env: { ...process.env, ...env } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('fusion validate', () => {
  it('prints the normalised arguments (docs/behaviour.md#a4) and exits 0', () => {
    const r = validate('fusion_investigate', { objective: ' find risk ', background: [' repo changed '], deliverable: ' report ' });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ objective: 'find risk', background: ['repo changed'], deliverable: 'report', scope: [], constraints: [] });
  });

  it.each([
    [[], 'fusion_investigate arguments must be an object'],
    [{ objective: 'a', background: [], deliverable: 'b', mode: 1, zeta: 2 }, 'fusion_investigate contains unsupported key(s): mode, zeta'],
    [{ objective: 'a' }, 'fusion_investigate missing required key(s): background, deliverable'],
    [{ objective: '  ', background: [], deliverable: 'b' }, 'fusion_investigate.objective must not be blank'],
    [{ objective: 1, background: [], deliverable: 'b' }, 'fusion_investigate.objective must be a string'],
    [{ objective: 'a', background: 'x', deliverable: 'b' }, 'fusion_investigate.background must be an array of strings'],
  ])('rejects %j with the exact message and exit 2', (input, message) => {
    const r = validate('fusion_investigate', input);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe(message);
    expect(r.stdout).toBe('');
  });

  it('canonicalises research sources and rejects loopback encodings (docs/behaviour.md#e1)', () => {
    const base = { objective: 'o', background: [], deliverable: 'd' };
    const ok = validate('fusion_research', { ...base, sources: [{ url: 'HTTPS://Example.COM:443/a?q=1#frag', purpose: ' p ' }] });
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout).sources).toEqual([{ url: 'https://example.com/a?q=1', purpose: 'p' }]);
    for (const url of ['http://2130706433/', 'http://0x7f.1/', 'http://127.1/']) {
      const r = validate('fusion_research', { ...base, sources: [{ url, purpose: 'p' }] });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('fusion_research.sources[0].url must be a declared public http(s) URL:');
    }
    const dup = validate('fusion_research', { ...base, sources: [{ url: 'https://example.com/a', purpose: 'p' }, { url: 'https://example.com./a', purpose: 'q' }] });
    expect(dup.code).toBe(2);
    expect(dup.stderr.trim()).toBe('fusion_research.sources[1].url duplicates canonical URL from sources[0]: https://example.com/a');
  });

  it('creates nothing (no data directory, no socket)', () => {
    const home = join(mkdtempSync(join(tmpdir(), 'fusion-validate-')), 'home');
    validate('fusion_investigate', { objective: 'a', background: [], deliverable: 'b' }, { FUSION_HOME: home });
    expect(readdirSync(join(home, '..'))).toEqual([]);
  });

  it('reports unparsable JSON and an unknown tool as usage errors (exit 2)', () => {
    expect(validate('fusion_investigate', '{nope').code).toBe(2);
    expect(validate('fusion_nothing', {}).code).toBe(2);
  });
});
