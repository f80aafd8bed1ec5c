/**
 * robots.txt as RFC 9309 reads it, for one crawler's product token.
 *
 * - Lines are `key: value`; `#` starts a comment; keys are case-insensitive; unknown keys
 *   (Sitemap, Crawl-delay, …) are ignored, as are lines without a colon.
 * - A group is one or more consecutive `User-agent` lines followed by rules; a `User-agent` line
 *   after a rule starts a new group. Rules before any `User-agent` line belong to no group.
 * - Our group: every group naming our product token (case-insensitive; a `/version` suffix on
 *   either side is ignored), combined; when none does, every `*` group, combined; when neither
 *   exists, everything is allowed.
 * - A rule matches when its pattern matches a prefix of the URL's path and query; `*` matches any
 *   run of characters and a final `$` anchors the end. The longest matching pattern (in
 *   characters) wins; on a tie Allow wins (the least restrictive, as the RFC recommends). An
 *   empty `Disallow:` is no rule. `/robots.txt` itself is always allowed.
 * - Percent-encoding: patterns and paths are compared in one form, non-ASCII characters
 *   percent-encoded as UTF-8 and escapes upper-cased, so `/caf%c3%a9`, `/café` and `/caf%C3%A9`
 *   are the same path.
 *
 * Matching searches each pattern's `*`-separated segments forward, never backtracking and never
 * with a RegExp built from the file, so a hostile robots.txt cannot make a URL check expensive.
 */

export interface RobotsRule {
  allow: boolean;
  /** Normalised pattern, including a trailing `$` when anchored. */
  pattern: string;
}

export interface RobotsRules {
  /** The rules of our group (empty: everything allowed). */
  rules: RobotsRule[];
  /** Which group applied: our token, `*`, or none. */
  group: 'agent' | 'star' | 'none';
}

interface Group {
  agents: string[];
  rules: RobotsRule[];
}

/** The product token of a User-Agent string: up to the first `/`, space or `(`, lowercased. */
export function productToken(userAgent: string): string {
  return (userAgent.trim().split(/[/\s(]/u, 1)[0] ?? '').toLowerCase();
}

/** Percent-encodes non-ASCII (as UTF-8) and upper-cases existing escapes. */
export function normalizeRobotsPath(text: string): string {
  let out = '';
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    if (code > 0x7e || code < 0x21) {
      for (const byte of Buffer.from(char, 'utf8')) out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    } else {
      out += char;
    }
  }
  return out.replace(/%[0-9a-f]{2}/giu, (escape) => escape.toUpperCase());
}

export function parseRobots(text: string, userAgent: string): RobotsRules {
  const token = productToken(userAgent);
  const groups: Group[] = [];
  let current: Group | undefined;
  let lastWasAgent = false;
  for (const rawLine of text.split(/\r\n|\r|\n/u)) {
    const hash = rawLine.indexOf('#');
    const line = (hash >= 0 ? rawLine.slice(0, hash) : rawLine).trim();
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const key = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (key === 'user-agent') {
      if (current === undefined || !lastWasAgent) {
        current = { agents: [], rules: [] };
        groups.push(current);
      }
      current.agents.push(value === '*' ? '*' : productToken(value));
      lastWasAgent = true;
      continue;
    }
    if (key !== 'allow' && key !== 'disallow') continue;
    lastWasAgent = false;
    if (current === undefined || value === '') continue;
    current.rules.push({ allow: key === 'allow', pattern: normalizeRobotsPath(value) });
  }
  const ours = groups.filter((group) => token !== '' && group.agents.includes(token));
  if (ours.length > 0) return { rules: ours.flatMap((group) => group.rules), group: 'agent' };
  const star = groups.filter((group) => group.agents.includes('*'));
  if (star.length > 0) return { rules: star.flatMap((group) => group.rules), group: 'star' };
  return { rules: [], group: 'none' };
}

/**
 * Does `pattern` (with `*` wildcards and an optional final `$`) match a prefix of `path` (the
 * whole of it when anchored)? The pattern is split on `*` into literal segments: the first must
 * start the path, each next one is found at its leftmost place after the previous (leftmost is
 * always safe when the only wildcard is `*`), and an anchored pattern's last segment must end the
 * path. The search position only moves forward, so one check costs about one pass over the path
 * per segment found, never |path|·|pattern| (a backtracking walk let a hostile robots.txt and a
 * long link stall the daemon's event loop for minutes).
 */
export function robotsPatternMatches(pattern: string, path: string): boolean {
  const anchored = pattern.endsWith('$');
  const segments = (anchored ? pattern.slice(0, -1) : pattern).split('*');
  const first = segments[0]!;
  if (!path.startsWith(first)) return false;
  if (segments.length === 1) return !anchored || path.length === first.length;
  let at = first.length;
  const last = segments.length - 1;
  for (let i = 1; i < last; i++) {
    const segment = segments[i]!;
    if (segment === '') continue;
    const found = path.indexOf(segment, at);
    if (found < 0) return false;
    at = found + segment.length;
  }
  const tail = segments[last]!;
  if (anchored) return path.length - tail.length >= at && path.endsWith(tail);
  return tail === '' || path.indexOf(tail, at) >= 0;
}

export interface RobotsVerdict {
  allowed: boolean;
  /** The rule that decided (absent: no rule matched). */
  rule?: RobotsRule;
}

/** The verdict for one URL's path and query (e.g. `/a/b?x=1`). */
export function robotsAllows(rules: RobotsRules, pathAndQuery: string): RobotsVerdict {
  const path = normalizeRobotsPath(pathAndQuery === '' ? '/' : pathAndQuery);
  if (path === '/robots.txt') return { allowed: true };
  let best: RobotsRule | undefined;
  for (const rule of rules.rules) {
    if (!robotsPatternMatches(rule.pattern, path)) continue;
    if (best === undefined || rule.pattern.length > best.pattern.length || (rule.pattern.length === best.pattern.length && rule.allow && !best.allow)) {
      best = rule;
    }
  }
  return best === undefined ? { allowed: true } : { allowed: best.allow, rule: best };
}
