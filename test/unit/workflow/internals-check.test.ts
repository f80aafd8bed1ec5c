import { describe, expect, it } from 'vitest';
import { INTERNALS_PATTERNS, findFusionInternals, stripCode } from '../../../src/workflow/internals-check.js';

describe('findFusionInternals: positives (docs/behaviour.md#c4)', () => {
  it.each([
    ['Candidate A found the bug in `src/app.ts:3`.', ['Candidate A']],
    ['As candidate B noted, the retry is unbounded.', ['candidate B']],
    ['Answer C is right about the cache.', ['Answer C']],
    ['Both candidates A and B cite the same line.', ['candidates A and B']],
    ['Candidates A, B and C agree.', ['Candidates A, B and C']],
    ['Responses A/C disagree.', ['Responses A/C']],
    ["B's answer misses the lock.", ["B's answer"]],
    ['(A) says the lock is held; (B) and (C) disagree.', ['(A) says', '(B) and (C) disagree']],
    ['According to (C), the flag is unused.', ['According to (C)']],
    ['All three candidates cite the README.', ['three candidates']],
    ['The three candidates A, B and C agree.', ['three candidates A, B and C']],
    ['The candidate answers differ on timeouts.', ['candidate answers']],
    ['The sandbox child could not read the file.', ['sandbox child']],
    ['One child agent timed out.', ['child agent']],
    ['The three children agreed.', ['three children']],
    ['The blind evaluator preferred the first answer.', ['blind evaluator']],
    ['The evaluator said this was unverified.', ['The evaluator said']],
    ['Per the synthesis plan, the cache section is included.', ['synthesis plan']],
    ['The must_include list names two findings.', ['must_include']],
    ['As the merger, I combined the findings.', ['As the merger']],
    ['The merger model wrote this.', ['merger model']],
    ['This came from provider openai.', ['provider openai']],
    ['Configured with provider: anthropic.', ['provider: anthropic']],
    ['A large language model produced this.', ['large language model']],
    ['The LLM could not verify it.', ['LLM']],
    ['GPT-4o and Claude disagree here.', ['GPT-4o', 'Claude']],
    ['ChatGPT suggested a fix.', ['ChatGPT']],
    ['The model said the function is unused.', ['The model said']],
    ['Slot 1 produced the longest answer.', ['Slot 1']],
    ['The candidate slot mapping is hidden.', ['candidate slot']],
    ['This answer exposes fusion internals.', ['fusion internals']],
    ['The fusion run used the builtin engine.', ['fusion run', 'builtin engine']],
  ])('%s', (text, expected) => {
    expect(findFusionInternals(text)).toEqual(expected);
  });

  it('reports each phrase once, in order of appearance', () => {
    expect(findFusionInternals('Candidate A is wrong. Slot 2 too. Candidate A again.')).toEqual(['Candidate A', 'Slot 2']);
  });
});

describe('findFusionInternals: ordinary technical text passes', () => {
  it.each([
    'The `User` model maps to the users table; each model has a primary key.',
    'Data models are defined in src/models/, and the model layer validates input.',
    'The view model and the domain model are kept apart.',
    'Wrap the tree in an AuthProvider; the provider exposes the session.',
    'The OAuth provider Google is configured in auth.ts.',
    'The server spawns a child process with `child_process.spawn` and kills the child on exit.',
    'Parent and children nodes are stored in the tree.',
    'The expression evaluator handles operator precedence.',
    'After the merger of the two modules, exports moved to index.ts.',
    'A candidate key is a minimal superkey; the release candidate is tagged v2.0.0-rc.1.',
    'The solver prunes the other candidates early; both candidates are scored.',
    'Option A is faster. A user can answer a question.',
    'The HTTP Response Body is streamed.',
    'The GPT partition table is read first; the MBR is ignored.',
    'Claude Shannon defined information entropy.',
    'Insert the card in slot 12 of the rack.',
    'Steps: (a) read the file, (b) parse it, (c) write it.',
    'Choose (A) to keep the cache or (B) to drop it.',
    'Nuclear fusion is not relevant here.',
    'The answer is in `src/app.ts:42`:\n> `export function start() {`',
  ])('%s', (text) => {
    expect(findFusionInternals(text)).toEqual([]);
  });

  it('does not scan code: fenced blocks and inline code are quoted repository text', () => {
    const text = ['The prompt file says so:', '```ts', "const x = 'candidate A said';", '```', 'and `provider: openai` is a config key.'].join('\n');
    expect(findFusionInternals(text)).toEqual([]);
    expect(stripCode('a `b` c ``d ` e`` f')).toBe('a   c   f');
  });

  it('every pattern is documented and global', () => {
    for (const p of INTERNALS_PATTERNS) {
      expect(p.description.length).toBeGreaterThan(10);
      expect(p.re.flags).toContain('g');
    }
  });
});
