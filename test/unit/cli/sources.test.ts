import { describe, expect, it } from 'vitest';
import { parseArgs } from '../../../src/config/args.js';
import { sourcesFrom, splitSourceValue } from '../../../src/cli/sources.js';

const order = (...argv: string[]) => parseArgs(argv, { source: { value: true, repeat: true }, purpose: { value: true, repeat: true } }).order;

describe('research sources on the command line', () => {
  it('pairs --source URL --purpose TEXT in order, keeping query strings whole', () => {
    expect(sourcesFrom(order('--source', 'https://example.com/a?x=1&y=2', '--purpose', 'the guide', '--source', 'https://example.com/b=c', '--purpose', 'x=y'))).toEqual([
      { url: 'https://example.com/a?x=1&y=2', purpose: 'the guide' },
      { url: 'https://example.com/b=c', purpose: 'x=y' },
    ]);
  });

  it('splits URL=PURPOSE only where the split cannot misread the URL, and mixes with pairs', () => {
    expect(splitSourceValue('https://example.com/guide=How the bucket rejects requests')).toEqual({ url: 'https://example.com/guide', purpose: 'How the bucket rejects requests' });
    expect(splitSourceValue('https://example.com/guide=limits')).toEqual({ url: 'https://example.com/guide', purpose: 'limits' });
    expect(sourcesFrom(order('--source', 'https://a.example/=first page', '--source', 'https://b.example/?q=1', '--purpose', 'second'))).toEqual([
      { url: 'https://a.example/', purpose: 'first page' },
      { url: 'https://b.example/?q=1', purpose: 'second' },
    ]);
  });

  it('refuses what stays ambiguous, and a purpose with no source, with exact messages', () => {
    expect(() => splitSourceValue('https://example.com/search?q=fusion=docs')).toThrow(
      '--source "https://example.com/search?q=fusion=docs" is ambiguous: its "=" may belong to the URL; give the URL and its purpose separately: --source URL --purpose TEXT',
    );
    // Where the text after "=" looks like the rest of a URL, it is not taken as a purpose.
    expect(() => splitSourceValue('https://example.com/a=b/c')).toThrow('is ambiguous');
    expect(() => splitSourceValue('https://example.com/a?q=1')).toThrow('is ambiguous');
    expect(() => splitSourceValue('https://example.com/a')).toThrow('--source "https://example.com/a" has no purpose: give --source URL --purpose TEXT (or --source URL=PURPOSE)');
    expect(() => sourcesFrom(order('--purpose', 'orphan', '--source', 'https://a.example/'))).toThrow('--purpose "orphan" must follow the --source it describes');
  });
});
