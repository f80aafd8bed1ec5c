/**
 * The replay sandbox's memo of repository reads (sandbox/tools/repo-memo.ts): with it on, every
 * tool answers exactly what it answers without it (skipped large files, long lines, binary
 * files, symlinks, node_modules, CRLF lines included), and a second call is served from
 * what the first read (shown by changing the tree behind it, which a snapshot never does).
 * The memo is process-wide and stays on once enabled: this file runs in its own worker.
 */
import { symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTool } from '../../../../sandbox/tools/index.js';
import { memoizeRepositoryReads } from '../../../../sandbox/tools/repo-memo.js';
import { makeTempRepo, removeTempRepo } from './helpers.js';

let repo: string;

beforeAll(async () => {
  repo = await makeTempRepo({
    'src/a.ts': 'const needle = 1;\r\nconst other = 2;\n',
    'src/deep/b.ts': 'export const needle = "b";\n',
    'node_modules/dep/index.js': 'const needle = "dep";\n',
    'big.txt': `needle\n${'z'.repeat(1024 * 1024 + 10)}\n`,
    'long-line.txt': `${'x'.repeat(20_000)}needle\nshort needle\n`,
    'bin.dat': Buffer.from('needle\0binary'),
    'docs/guide.md': '# needle guide\n\nsee src/a.ts\n',
  });
  await symlink('src/a.ts', path.join(repo, 'inside-link.ts'));
});

afterAll(async () => {
  await removeTempRepo(repo);
});

const CALLS: Array<[string, Record<string, unknown>]> = [
  ['grep', { pattern: 'needle' }],
  ['grep', { pattern: 'NEEDLE', ignore_case: true, glob: '*.ts' }],
  ['grep', { pattern: 'needle', path: 'node_modules' }],
  ['grep', { pattern: 'needle', path: 'src/a.ts' }],
  ['find', { pattern: '**/*.ts' }],
  ['ls', { path: 'src' }],
  ['read', { path: 'src/a.ts' }],
];

async function answers(): Promise<string[]> {
  const out: string[] = [];
  for (const [name, args] of CALLS) {
    const r = await runTool(name, repo, args);
    out.push(r.ok ? `ok:${r.text}` : `error:${r.error}`);
  }
  return out;
}

describe('repository read memo', () => {
  it('answers every call exactly as the tools do without it, and serves repeats from the first read', async () => {
    const fresh = await answers();
    expect(fresh[0]).toContain('src/a.ts:1:const needle = 1;');
    memoizeRepositoryReads();
    expect(await answers()).toEqual(fresh);
    expect(await answers()).toEqual(fresh);
    // Behind the memo's back (a snapshot never changes; a test tree can): a grep still answers
    // from what was read, so the memo is what served it; a file never read is read.
    await writeFile(path.join(repo, 'src', 'a.ts'), 'changed\n');
    await writeFile(path.join(repo, 'src', 'c.ts'), 'const needle = "new";\n');
    const again = await runTool('grep', repo, { pattern: 'needle', path: 'src' });
    expect(again.ok && again.text).toContain('src/a.ts:1:const needle = 1;');
    expect(again.ok && again.text).not.toContain('src/c.ts');
  });
});
