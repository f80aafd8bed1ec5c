/**
 * The repository stands on its own: code, tests, benchmarks, build files and docs cite only
 * documents that are in the repository, and every `docs/<file>.md#anchor` they cite exists.
 * Comments in code say why on their own: ESLint's `fusion/standalone-comments` rule
 * (eslint.config.js) refuses a tracker number, an outside source document or a private marker in a
 * comment; the same pattern is checked here over the files ESLint does not read (docs, scripts).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const SCANNED = ['src', 'sandbox', 'jobs', 'examples', 'test', 'bench', 'scripts', 'mk', 'docs', 'Makefile', 'README.md', '.ci'];
const SELF = 'test/unit/doc-references.test.ts';

function trackedFiles(): string[] {
  const out = execFileSync('git', ['ls-files', '-co', '--exclude-standard', ...SCANNED], { cwd: ROOT, encoding: 'utf8' });
  return out.split('\n').filter((f) => f !== '' && f !== SELF && !f.startsWith('test/fixtures/') && existsSync(join(ROOT, f)));
}

function anchorsOf(file: string): Set<string> {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const ids = new Set<string>();
  for (const m of text.matchAll(/<a id="([^"]+)"><\/a>/gu)) ids.add(m[1]!);
  // GitHub-style heading slugs count as anchors too.
  for (const m of text.matchAll(/^#+\s+(.+)$/gmu)) {
    ids.add(m[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N}\s-]/gu, '').replace(/\s/gu, '-'));
  }
  return ids;
}

describe('document references', () => {
  const files = trackedFiles();

  it('scans the tree', () => {
    expect(files.length).toBeGreaterThan(50);
  });

  it('no file cites a document outside the repository', () => {
    // Spelled in pieces so that this file does not cite what it forbids.
    const spec = 'SPEC';
    const outside = new RegExp(`${spec} §|${spec} section|${spec}\\.md|DESIGN\\.md|DESIGN "|STYLE\\.md|shared/(?:${spec}|DESIGN|STYLE|seeds)`, 'u');
    const offenders = files.filter((f) => outside.test(readFileSync(join(ROOT, f), 'utf8')));
    expect(offenders).toEqual([]);
  });

  it('docs, build files and scripts cite no issue number, outside source document or private marker', async () => {
    const { FOREIGN_REFERENCE } = (await import(pathToFileURL(join(ROOT, 'eslint.config.js')).href)) as { FOREIGN_REFERENCE: RegExp };
    const linted = /\.(?:[cm]?js|ts)$/u;
    const pattern = new RegExp(FOREIGN_REFERENCE.source, 'gmu');
    const offenders = files.filter((f) => !linted.test(f)).flatMap((f) =>
      [...readFileSync(join(ROOT, f), 'utf8').matchAll(pattern)].map((m) => `${f}: ${m[0].trim()}`));
    expect(offenders).toEqual([]);
  });

  it('every docs/<file>.md#anchor reference resolves', () => {
    const anchors = new Map<string, Set<string>>();
    const broken: string[] = [];
    for (const f of files) {
      const text = readFileSync(join(ROOT, f), 'utf8');
      // A quoted or nested path (`'docs/guide.md'` in a fixture repository) is data, not a citation.
      for (const m of text.matchAll(/(?<![\w/'"`.-])docs\/([\w-]+\.md)(?:#([\w-]+))?/gu)) {
        const doc = `docs/${m[1]!}`;
        if (!existsSync(join(ROOT, doc))) {
          broken.push(`${f}: ${m[0]} (no such file)`);
          continue;
        }
        if (m[2] === undefined) continue;
        let ids = anchors.get(doc);
        if (!ids) anchors.set(doc, (ids = anchorsOf(doc)));
        if (!ids.has(m[2])) broken.push(`${f}: ${m[0]} (no such anchor)`);
      }
    }
    expect(broken).toEqual([]);
  });
});
