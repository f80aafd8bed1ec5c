/**
 * The judgement that a completed task read nothing (docs/behaviour.md#nothing-read): every
 * declared source of a research task unread, or a snapshot with no file while files were left
 * out as unreadable or secret. Anything read, or nothing to have failed at, is not "nothing read".
 */
import { describe, expect, it } from 'vitest';
import { nothingReadOf, nothingReadSentence } from '../../../src/tasks/nothing-read.js';

const research = (n: number): string => JSON.stringify({ workflow: 'research', context: { declared_sources: Array.from({ length: n }, (_, i) => ({ canonical_url: `https://s${i}.example.test/` })) } });
const unread = (...urls: string[]): Array<{ url: string; reason: string }> => urls.map((url) => ({ url, reason: 'dns_error: no such host' }));
const snapshot = (files: number | undefined, unreadable: number, secret = 0): Record<string, unknown> => ({ repository: { entries: 4, ...(files === undefined ? {} : { files }), skipped: { unreadable, secret, excluded: 0 } } });

describe('nothingReadOf', () => {
  it('research: every declared source unread is nothing read; one read is not', () => {
    expect(nothingReadOf('research', research(2), { sources_not_read: unread('https://s0.example.test/', 'https://s1.example.test/') })).toEqual({ what: 'sources', count: 2 });
    expect(nothingReadOf('research', research(2), { sources_not_read: unread('https://s0.example.test/') })).toBeNull();
    expect(nothingReadOf('research', research(2), {})).toBeNull();
  });

  it('research: the repository does not decide (a research task is judged by its sources)', () => {
    expect(nothingReadOf('research', research(1), snapshot(0, 5))).toBeNull();
  });

  it('a snapshot without a file while files were left out (unreadable or secret) is nothing read', () => {
    expect(nothingReadOf('investigate', '{}', snapshot(0, 3))).toEqual({ what: 'files', count: 3 });
    expect(nothingReadOf('investigate', '{}', snapshot(0, 0, 1))).toEqual({ what: 'files', count: 1 });
  });

  it('a file read, an empty repository, no snapshot, or one recorded before files were counted is not', () => {
    expect(nothingReadOf('investigate', '{}', snapshot(1, 3))).toBeNull();
    expect(nothingReadOf('investigate', '{}', snapshot(0, 0))).toBeNull();
    expect(nothingReadOf('investigate', '{}', {})).toBeNull();
    expect(nothingReadOf('investigate', '{}', snapshot(undefined, 3))).toBeNull();
  });

  it('an unreadable canonical input declares nothing, so nothing is judged unread', () => {
    expect(nothingReadOf('research', 'not json', { sources_not_read: unread('https://s0.example.test/') })).toBeNull();
  });

  it('the sentence names what was not read and the section that says why', () => {
    expect(nothingReadSentence({ what: 'sources', count: 1 })).toBe('Nothing was read: none of its 1 declared source could be fetched, so the answer is written without them (see "Sources not read").');
    expect(nothingReadSentence({ what: 'files', count: 7 })).toContain('none of the repository\'s files could be read (7 left out)');
  });
});
