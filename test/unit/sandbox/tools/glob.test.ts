import { describe, expect, it } from 'vitest';
import { compileGlob, GlobSyntaxError, matchGlob } from '../../../../sandbox/tools/glob.js';

const cases: [pattern: string, path: string, expected: boolean][] = [
  // *
  ['*.ts', 'a.ts', true],
  ['*.ts', 'src/a.ts', false],
  ['*.ts', '.hidden.ts', true],
  ['src/*.ts', 'src/a.ts', true],
  ['src/*.ts', 'src/util/a.ts', false],
  ['src/*', 'src/', true],
  ['a*b*c', 'aXXbYYc', true],
  ['a*b*c', 'aXX/bYYc', false],
  // **
  ['**', 'a/b/c.ts', true],
  ['**/*.ts', 'a.ts', true],
  ['**/*.ts', 'src/util/a.ts', true],
  ['**/*.ts', 'src/util/a.tsx', false],
  ['src/**/*.ts', 'src/a.ts', true],
  ['src/**/*.ts', 'src/x/y/z.ts', true],
  ['src/**/*.ts', 'lib/x.ts', false],
  ['src/**', 'src/x/y', true],
  ['src/**', 'srcx/y', false],
  ['**/test/**', 'a/test/b.ts', true],
  ['**/test/**', 'a/tests/b.ts', false],
  ['a**b', 'aXb', true],
  ['a**b', 'aX/b', false],
  ['src/***/x', 'src/a/b/x', true],
  // ?
  ['?.ts', 'a.ts', true],
  ['?.ts', 'ab.ts', false],
  ['a?b', 'a/b', false],
  // {a,b}
  ['*.{ts,tsx}', 'a.tsx', true],
  ['*.{ts,tsx}', 'a.js', false],
  ['{src,test}/**/*.ts', 'test/unit/x.ts', true],
  ['{src,test}/**/*.ts', 'lib/x.ts', false],
  ['a{b,c{d,e}}f', 'acef', true],
  ['a{b,c{d,e}}f', 'acf', false],
  ['a{,b}c', 'ac', true],
  ['a{,b}c', 'abc', true],
  ['{a,b', '{a,b', true],
  ['{**/x,y}', 'p/q/x', true],
  // character classes
  ['[abc].ts', 'b.ts', true],
  ['[abc].ts', 'd.ts', false],
  ['[a-c]x', 'bx', true],
  ['[a-c]x', 'dx', false],
  ['[!a-c]x', 'dx', true],
  ['[^a-c]x', 'ax', false],
  ['[]]', ']', true],
  ['[!]]', 'a', true],
  ['a[/]b', 'a/b', false],
  ['[[:digit:]][[:alpha:]]', '7q', true],
  ['[[:upper:]]*', 'readme', false],
  ['[abc', '[abc', true],
  ['x[a\\]]', 'x]', true],
  // escapes and literals
  ['\\*.ts', '*.ts', true],
  ['\\*.ts', 'a.ts', false],
  ['a.b', 'aXb', false],
  ['(x)+', '(x)+', true],
  ['$^|', '$^|', true],
  // leading ./ and /
  ['./src/*.ts', 'src/a.ts', true],
  ['/src/*.ts', 'src/a.ts', true],
  // unicode
  ['*.md', 'ñandú.md', true],
  ['?.md', '😀.md', true],
];

describe('matchGlob', () => {
  it.each(cases)('%s vs %s → %s', (pattern, p, expected) => {
    expect(matchGlob(pattern, p)).toBe(expected);
  });

  it('matchBase applies a slash-free pattern to the last segment', () => {
    const m = compileGlob('*.ts', { matchBase: true });
    expect(m('src/util/a.ts')).toBe(true);
    expect(m('src/util/a.js')).toBe(false);
    const withSlash = compileGlob('util/*.ts', { matchBase: true });
    expect(withSlash('src/util/a.ts')).toBe(false);
    expect(withSlash('util/a.ts')).toBe(true);
  });

  it('stays fast on patterns that make backtracking regexes explode', () => {
    const pattern = `${'*a'.repeat(30)}*b`;
    const input = 'a'.repeat(4000);
    const started = Date.now();
    expect(matchGlob(pattern, input)).toBe(false);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('handles deeply nested braces and rejects overlong patterns', () => {
    expect(matchGlob('{'.repeat(10) + 'x' + '}'.repeat(10), 'x')).toBe(true);
    // Beyond the nesting limit braces turn literal instead of recursing further.
    expect(() => compileGlob('{'.repeat(400) + 'x' + '}'.repeat(400))).not.toThrow();
    expect(() => compileGlob('a'.repeat(1001))).toThrow(GlobSyntaxError);
    expect(() => compileGlob('[[:nope:]]')).toThrow(/unknown character class/);
  });
});
