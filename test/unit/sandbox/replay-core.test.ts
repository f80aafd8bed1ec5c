/**
 * The replay's record of what a call depended on: the digest of the tree it looked at. It is
 * the documented format (sorted `path\tkind\tdigest` lines, file contents included,
 * `.git`/`node_modules` skipped) and the same every time, so an offline auditor's replay
 * recomputes it exactly (a guard for any change that makes the replay cheaper).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { REPLAY_TIMER_FACTOR, onceForSameCalls, replayCalls, replayToolLimits, type ReplayCall, type ReplayedCall } from '../../../sandbox/replay-core.js';
import { DEFAULT_TOOL_LIMITS } from '../../../sandbox/tools/index.js';

const sha = (b: string | Buffer): string => createHash('sha256').update(b).digest('hex');
let dir = '';
afterEach(() => rmSync(dir, { recursive: true, force: true }));

it('digests a tree of many files to the documented sorted-lines digest, the same every time', async () => {
  dir = mkdtempSync(join(tmpdir(), 'fusion-replay-core-'));
  const lines: string[] = [];
  for (let d = 0; d < 5; d++) {
    mkdirSync(join(dir, `d${d}`));
    lines.push(`d${d}\tdir\t`);
    for (let f = 0; f < 40; f++) {
      // Sizes differ a lot, so parallel reads finish out of order.
      const body = `${d}:${f}\n`.repeat(1 + ((f * 7919) % 3000));
      writeFileSync(join(dir, `d${d}`, `f${f}.txt`), body);
      lines.push(`d${d}/f${f}.txt\tfile\t${sha(body)}`);
    }
  }
  mkdirSync(join(dir, 'node_modules'));
  writeFileSync(join(dir, 'node_modules', 'skipped.js'), 'x');
  symlinkSync('d0/f0.txt', join(dir, 'link'));
  lines.push('link\tlink\t');
  const expected = sha([...lines].sort().join('\n'));

  const call = { ordinal: 0, tool_name: 'ls', arguments: JSON.stringify({ path: '.' }) };
  const tools = ['read', 'grep', 'find', 'ls'];
  const [first] = await replayCalls(dir, [call], tools);
  const [second] = await replayCalls(dir, [call], tools);
  expect(first?.touched).toEqual({ '.': expected });
  expect(second?.touched).toEqual(first?.touched);
});

it('marks a replayed call its own wall-clock limit cut, and relaxes the candidate\'s timers for the replay', async () => {
  dir = mkdtempSync(join(tmpdir(), 'fusion-replay-core-'));
  writeFileSync(join(dir, 'evil.txt'), `${'a'.repeat(40)}b\n`);
  const call = { ordinal: 0, tool_name: 'grep', arguments: JSON.stringify({ pattern: '^(a+)+$', path: 'evil.txt' }) };
  const [cut] = await replayCalls(dir, [call], ['grep'], { regexTimeoutMs: 1 });
  expect(cut?.timer_cut).toBe(true);
  const [plain] = await replayCalls(dir, [{ ordinal: 1, tool_name: 'ls', arguments: '{}' }], ['ls']);
  expect(plain !== undefined && 'timer_cut' in plain).toBe(false);
  expect(replayToolLimits({ regexTimeoutMs: 100 })).toMatchObject({ regexTimeoutMs: 100 * REPLAY_TIMER_FACTOR, timeBudgetMs: DEFAULT_TOOL_LIMITS.timeBudgetMs * REPLAY_TIMER_FACTOR });
});

// A retried attempt repeats the calls of the attempt whose replay was inconclusive: a result the
// replay's own timer cut must be replayed again for it, not served from the first replay.
it('answers an identical call from the first replay, unless a wall-clock limit cut that replay', async () => {
  const runs: string[] = [];
  const cutFirst = new Set(['grep\u0000{"pattern":"slow"}']);
  const inner = async (call: ReplayCall): Promise<ReplayedCall> => {
    const key = `${call.tool_name}\u0000${call.arguments}`;
    runs.push(key);
    const cut = cutFirst.delete(key);
    return { ordinal: call.ordinal, tool_name: call.tool_name, status: 'ok', result_bytes: 1, result_sha256: sha(`${key}${cut ? ' cut' : ''}`), touched: {}, ...(cut ? { timer_cut: true as const } : {}) };
  };
  const replay = onceForSameCalls(inner);
  const fast = { tool_name: 'grep', arguments: '{"pattern":"fast"}' };
  const slow = { tool_name: 'grep', arguments: '{"pattern":"slow"}' };
  const first = [await replay({ ordinal: 0, ...fast }), await replay({ ordinal: 1, ...slow })];
  const again = [await replay({ ordinal: 0, ...fast }), await replay({ ordinal: 1, ...slow }), await replay({ ordinal: 2, ...slow })];
  // The fast grep ran once; the cut one ran again, and its whole answer then served the third call.
  expect(runs).toEqual(['grep\u0000{"pattern":"fast"}', 'grep\u0000{"pattern":"slow"}', 'grep\u0000{"pattern":"slow"}']);
  expect(first[1]?.timer_cut).toBe(true);
  expect(again.map((r) => r?.timer_cut)).toEqual([undefined, undefined, undefined]);
  expect(again.map((r) => r?.ordinal)).toEqual([0, 1, 2]);
  expect(again[0]?.result_sha256).toBe(first[0]?.result_sha256);
});
