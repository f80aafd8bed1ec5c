/** The `.gitignore`-style exclude matcher of repository bundles (docs/behaviour.md#repository-bundles). */
import { describe, expect, it } from 'vitest';
import { compileExcludes } from '../../../src/bundles/excludes.js';

const matches = (patterns: string[], path: string, isDir = false): boolean => compileExcludes(patterns).excludes(path, isDir);

describe('compileExcludes', () => {
  it('matches a name without a slash at any depth, and anchors one with a slash', () => {
    expect(matches(['*.log'], 'a.log')).toBe(true);
    expect(matches(['*.log'], 'deep/er/a.log')).toBe(true);
    expect(matches(['/a.log'], 'deep/a.log')).toBe(false);
    expect(matches(['/a.log'], 'a.log')).toBe(true);
    expect(matches(['src/*.ts'], 'src/x.ts')).toBe(true);
    expect(matches(['src/*.ts'], 'lib/src/x.ts')).toBe(false);
    expect(matches(['src/*.ts'], 'src/sub/x.ts')).toBe(false);
  });

  it('handles **, ?, classes, dir-only patterns, comments, escapes and negation (last match wins)', () => {
    expect(matches(['**/fixtures'], 'a/b/fixtures', true)).toBe(true);
    expect(matches(['docs/**'], 'docs/a/b.md')).toBe(true);
    expect(matches(['a/**/z'], 'a/z')).toBe(true);
    expect(matches(['a/**/z'], 'a/b/c/z')).toBe(true);
    expect(matches(['file?.txt'], 'file1.txt')).toBe(true);
    expect(matches(['file?.txt'], 'file/.txt')).toBe(false);
    expect(matches(['[ab].c'], 'a.c')).toBe(true);
    expect(matches(['[!ab].c'], 'a.c')).toBe(false);
    expect(matches(['[!ab].c'], 'x.c')).toBe(true);
    expect(matches(['build/'], 'build', false)).toBe(false);
    expect(matches(['build/'], 'build', true)).toBe(true);
    expect(matches(['# comment', ''], 'comment')).toBe(false);
    expect(matches(['\\#hash'], '#hash')).toBe(true);
    expect(matches(['*.log', '!keep.log'], 'keep.log')).toBe(false);
    expect(matches(['!keep.log', '*.log'], 'keep.log')).toBe(true);
    expect(matches(['a.b'], 'axb')).toBe(false);
  });
});
