/**
 * Glob matching without npm packages (Node 20 has no fs.glob).
 *
 * Syntax:
 *   `*`       any run of characters except `/` (dotfiles included)
 *   `?`       one character except `/`
 *   `**`      as a whole path segment: any number of segments (`**` + `/` = zero or more
 *             `dir/` prefixes, trailing `/**` = everything below); elsewhere it acts like `*`
 *   `[abc]` `[a-z]` `[!x]` `[^x]` `[[:alpha:]]`  character classes (never match `/`)
 *   `{a,b}`   alternatives, nestable, may contain `/` and other globs
 *   `\x`      the character x literally
 * An unclosed `[` or `{` is a literal character. A leading `./` or `/` is ignored (patterns
 * are relative to the search base).
 *
 * Why an NFA and not a RegExp: a pattern such as `*a*a*a*a*a*b` compiled to a backtracking
 * regex can take exponential time on a long path. Simulating the automaton state set keeps
 * matching at O(path length × pattern size) whatever the pattern.
 */

export interface GlobOptions {
  /** When the pattern contains no `/`, match it against the last path segment only. */
  matchBase?: boolean;
}

export type GlobMatcher = (path: string) => boolean;

export const MAX_GLOB_CHARS = 1000;
const MAX_BRACE_DEPTH = 16;

export class GlobSyntaxError extends Error {
  override readonly name = 'GlobSyntaxError';
}

type CharTest = (ch: string) => boolean;

type Node =
  | { kind: 'char'; test: CharTest }
  /** `[^/]*` */
  | { kind: 'star' }
  /** `.*` (slashes included) */
  | { kind: 'any' }
  /** `([^/]*\/)*` */
  | { kind: 'segments' }
  | { kind: 'alt'; branches: Node[][] };

interface ParseResult {
  nodes: Node[];
  index: number;
  /** The character that ended this sequence: ',' or '}' inside braces, '' at the end. */
  stop: '' | ',' | '}';
}

const notSlash: CharTest = (ch) => ch !== '/';
const anyChar: CharTest = () => true;

const POSIX_CLASSES: Record<string, CharTest> = {
  alpha: (c) => /^\p{L}$/u.test(c),
  digit: (c) => c >= '0' && c <= '9',
  alnum: (c) => /^[\p{L}\p{Nd}]$/u.test(c),
  upper: (c) => /^\p{Lu}$/u.test(c),
  lower: (c) => /^\p{Ll}$/u.test(c),
  space: (c) => /^\s$/u.test(c),
  xdigit: (c) => /^[0-9a-fA-F]$/.test(c),
  punct: (c) => /^[!-/:-@[-`{-~]$/.test(c),
  word: (c) => /^[\p{L}\p{Nd}_]$/u.test(c),
};

function literal(ch: string): Node {
  return { kind: 'char', test: (c) => c === ch };
}

/** Parse `pattern` from `start`; inside braces stop at a top-level ',' or '}'. */
function parseSeq(pattern: string, start: number, depth: number): ParseResult {
  const nodes: Node[] = [];
  let i = start;
  while (i < pattern.length) {
    const ch = pattern[i] as string;
    if (depth > 0 && (ch === ',' || ch === '}')) return { nodes, index: i, stop: ch };
    if (ch === '\\') {
      const next = pattern[i + 1];
      if (next === undefined) {
        nodes.push(literal('\\'));
        i += 1;
      } else {
        const cp = pattern.codePointAt(i + 1) as number;
        const text = String.fromCodePoint(cp);
        nodes.push(literal(text));
        i += 1 + text.length;
      }
      continue;
    }
    if (ch === '*') {
      let end = i;
      while (pattern[end] === '*') end += 1;
      const before = i === 0 ? '' : (pattern[i - 1] as string);
      const after = pattern[end] ?? '';
      const segmentStart = before === '' || before === '/' || before === '{' || before === ',';
      const segmentEnd = after === '' || after === '/' || after === '}' || after === ',';
      if (end - i >= 2 && segmentStart && segmentEnd) {
        if (after === '/') {
          nodes.push({ kind: 'segments' });
          i = end + 1;
        } else {
          nodes.push({ kind: 'any' });
          i = end;
        }
      } else {
        nodes.push({ kind: 'star' });
        i = end;
      }
      continue;
    }
    if (ch === '?') {
      nodes.push({ kind: 'char', test: notSlash });
      i += 1;
      continue;
    }
    if (ch === '[') {
      const cls = parseClass(pattern, i);
      if (cls) {
        nodes.push({ kind: 'char', test: cls.test });
        i = cls.index;
        continue;
      }
      nodes.push(literal('['));
      i += 1;
      continue;
    }
    if (ch === '{' && depth < MAX_BRACE_DEPTH) {
      const alt = parseBraces(pattern, i, depth);
      if (alt) {
        nodes.push(alt.node);
        i = alt.index;
        continue;
      }
      nodes.push(literal('{'));
      i += 1;
      continue;
    }
    const cp = pattern.codePointAt(i) as number;
    const text = String.fromCodePoint(cp);
    nodes.push(literal(text));
    i += text.length;
  }
  return { nodes, index: i, stop: '' };
}

/** `{a,b,...}` starting at `open`; null when unclosed (then `{` is literal). */
function parseBraces(pattern: string, open: number, depth: number): { node: Node; index: number } | null {
  const branches: Node[][] = [];
  let i = open + 1;
  for (;;) {
    const part = parseSeq(pattern, i, depth + 1);
    branches.push(part.nodes);
    if (part.stop === '}') return { node: { kind: 'alt', branches }, index: part.index + 1 };
    if (part.stop === ',') {
      i = part.index + 1;
      continue;
    }
    return null;
  }
}

/** `[...]` starting at `open`; null when unclosed (then `[` is literal). */
function parseClass(pattern: string, open: number): { test: CharTest; index: number } | null {
  let i = open + 1;
  let negate = false;
  if (pattern[i] === '!' || pattern[i] === '^') {
    negate = true;
    i += 1;
  }
  const members: CharTest[] = [];
  let first = true;
  while (i < pattern.length) {
    const ch = pattern[i] as string;
    if (ch === ']' && !first) {
      const test: CharTest = (c) => c !== '/' && members.some((m) => m(c)) !== negate;
      return { test, index: i + 1 };
    }
    first = false;
    if (ch === '[' && pattern[i + 1] === ':') {
      const close = pattern.indexOf(':]', i + 2);
      if (close !== -1) {
        const name = pattern.slice(i + 2, close);
        const posix = POSIX_CLASSES[name];
        if (posix === undefined) throw new GlobSyntaxError(`unknown character class [:${name}:]`);
        members.push(posix);
        i = close + 2;
        continue;
      }
    }
    let lo: number;
    if (ch === '\\' && i + 1 < pattern.length) {
      lo = pattern.codePointAt(i + 1) as number;
      i += 1 + String.fromCodePoint(lo).length;
    } else {
      lo = pattern.codePointAt(i) as number;
      i += String.fromCodePoint(lo).length;
    }
    if (pattern[i] === '-' && i + 1 < pattern.length && pattern[i + 1] !== ']') {
      let hiIndex = i + 1;
      if (pattern[hiIndex] === '\\' && hiIndex + 1 < pattern.length) hiIndex += 1;
      const hi = pattern.codePointAt(hiIndex) as number;
      i = hiIndex + String.fromCodePoint(hi).length;
      const [a, b] = lo <= hi ? [lo, hi] : [hi, lo];
      members.push((c) => {
        const cp = c.codePointAt(0) as number;
        return cp >= a && cp <= b;
      });
    } else {
      const single = String.fromCodePoint(lo);
      members.push((c) => c === single);
    }
  }
  return null;
}

/** Thompson NFA: a state either consumes one character (`test`) or is an ε-split. */
interface NfaState {
  test: CharTest | null;
  out: number[];
}

class Nfa {
  readonly states: NfaState[] = [];
  readonly accept: number;
  readonly start: number;

  constructor(nodes: Node[]) {
    this.accept = this.add(null, []);
    this.start = this.seq(nodes, this.accept);
  }

  private add(test: CharTest | null, out: number[]): number {
    this.states.push({ test, out });
    return this.states.length - 1;
  }

  /** Build back to front: every node is compiled knowing the state that follows it. */
  private seq(nodes: Node[], next: number): number {
    let cur = next;
    for (let k = nodes.length - 1; k >= 0; k -= 1) cur = this.node(nodes[k] as Node, cur);
    return cur;
  }

  private loop(body: (loopState: number) => number, next: number): number {
    const loopState = this.add(null, []);
    const bodyStart = body(loopState);
    (this.states[loopState] as NfaState).out = [bodyStart, next];
    return loopState;
  }

  private node(node: Node, next: number): number {
    switch (node.kind) {
      case 'char':
        return this.add(node.test, [next]);
      case 'star':
        return this.loop((l) => this.add(notSlash, [l]), next);
      case 'any':
        return this.loop((l) => this.add(anyChar, [l]), next);
      case 'segments':
        return this.loop((l) => this.seq([{ kind: 'star' }, literal('/')], l), next);
      case 'alt':
        return this.add(
          null,
          node.branches.map((b) => this.seq(b, next)),
        );
    }
  }

  matches(input: string): boolean {
    const seen = new Uint32Array(this.states.length);
    let generation = 1;
    let current: number[] = [];
    const addClosure = (set: number[], id: number): void => {
      const stack = [id];
      while (stack.length > 0) {
        const s = stack.pop() as number;
        if (seen[s] === generation) continue;
        seen[s] = generation;
        const state = this.states[s] as NfaState;
        if (state.test === null) {
          for (let k = state.out.length - 1; k >= 0; k -= 1) stack.push(state.out[k] as number);
        } else {
          set.push(s);
        }
        if (s === this.accept) set.push(s);
      }
    };
    addClosure(current, this.start);
    for (const ch of input) {
      generation += 1;
      const next: number[] = [];
      for (const s of current) {
        const state = this.states[s] as NfaState;
        if (state.test !== null && state.test(ch)) {
          for (const o of state.out) addClosure(next, o);
        }
      }
      if (next.length === 0) return false;
      current = next;
    }
    return current.includes(this.accept);
  }
}

/** Strip what a relative pattern does not need: leading `./` and `/`. */
function normalisePattern(pattern: string): string {
  let p = pattern;
  for (;;) {
    if (p.startsWith('./')) p = p.slice(2);
    else if (p.startsWith('/')) p = p.slice(1);
    else break;
  }
  return p;
}

/** Compile a glob into a matcher over `/`-separated relative paths. Throws GlobSyntaxError. */
export function compileGlob(pattern: string, options: GlobOptions = {}): GlobMatcher {
  if (pattern.length > MAX_GLOB_CHARS) throw new GlobSyntaxError(`pattern is longer than ${MAX_GLOB_CHARS} characters`);
  const normalised = normalisePattern(pattern);
  const nfa = new Nfa(parseSeq(normalised, 0, 0).nodes);
  if (options.matchBase === true && !normalised.includes('/')) {
    return (p) => nfa.matches(p.slice(p.lastIndexOf('/') + 1));
  }
  return (p) => nfa.matches(p);
}

/** One-shot convenience: does `path` match `pattern`? */
export function matchGlob(pattern: string, path: string, options: GlobOptions = {}): boolean {
  return compileGlob(pattern, options)(path);
}
