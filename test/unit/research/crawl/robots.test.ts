import { describe, expect, it } from 'vitest';
import { normalizeRobotsPath, parseRobots, productToken, robotsAllows, robotsPatternMatches } from '../../../../src/research/crawl/robots.js';

const UA = 'FluxusResearchBot';

function allowed(robots: string, path: string, userAgent = UA): boolean {
  return robotsAllows(parseRobots(robots, userAgent), path).allowed;
}

describe('productToken', () => {
  it('takes the token before a version, comment or space, lowercased', () => {
    expect(productToken('FluxusResearchBot')).toBe('fluxusresearchbot');
    expect(productToken('FluxusResearchBot/1.2 (+https://x)')).toBe('fluxusresearchbot');
    expect(productToken('  Other Bot')).toBe('other');
  });
});

describe('group selection', () => {
  const robots = ['User-agent: *', 'Disallow: /star', '', 'User-agent: fluxusresearchbot', 'Disallow: /ours', '', 'User-agent: OtherBot', 'Disallow: /'].join('\n');

  it('uses the group naming our token (case-insensitive), not *', () => {
    expect(allowed(robots, '/ours/x')).toBe(false);
    expect(allowed(robots, '/star')).toBe(true);
  });

  it('falls back to * when no group names us', () => {
    expect(allowed(robots, '/star', 'SomeBot/1.0')).toBe(false);
    expect(allowed(robots, '/ours', 'SomeBot/1.0')).toBe(true);
    expect(parseRobots(robots, 'SomeBot').group).toBe('star');
  });

  it('a version on the robots.txt side still matches', () => {
    expect(allowed('User-agent: FluxusResearchBot/2.0\nDisallow: /v\n', '/v')).toBe(false);
  });

  it('does not match a longer or shorter token', () => {
    expect(allowed('User-agent: FluxusResearchBotExtra\nDisallow: /\n', '/a')).toBe(true);
    expect(allowed('User-agent: Fluxus\nDisallow: /\n', '/a')).toBe(true);
  });

  it('combines every group naming us, and consecutive User-agent lines share one group', () => {
    const text = 'User-agent: a\nUser-agent: FluxusResearchBot\nDisallow: /one\n\nUser-agent: FluxusResearchBot\nDisallow: /two\n';
    expect(allowed(text, '/one')).toBe(false);
    expect(allowed(text, '/two')).toBe(false);
    expect(allowed(text, '/three')).toBe(true);
    expect(allowed(text, '/one', 'a')).toBe(false);
    expect(allowed(text, '/two', 'a')).toBe(true);
  });

  it('ignores rules outside a group, comments, unknown keys and lines without a colon', () => {
    const text = 'Disallow: /orphan\n# comment\nSitemap: https://x/s.xml\ngarbage line\nUSER-AGENT: * # trailing\nCrawl-delay: 5\nDISALLOW: /x # why\n';
    expect(allowed(text, '/orphan')).toBe(true);
    expect(allowed(text, '/x/y')).toBe(false);
  });

  it('no groups, or an empty file: everything allowed', () => {
    expect(allowed('', '/a')).toBe(true);
    expect(parseRobots('', UA).group).toBe('none');
  });

  it('an empty Disallow allows everything', () => {
    expect(allowed('User-agent: *\nDisallow:\n', '/anything')).toBe(true);
  });

  it('handles CRLF and CR line ends', () => {
    expect(allowed('User-agent: *\r\nDisallow: /a\r\n', '/a')).toBe(false);
    expect(allowed('User-agent: *\rDisallow: /a\r', '/a')).toBe(false);
  });
});

describe('rule precedence (longest match; Allow wins a tie)', () => {
  it('the longest matching pattern decides', () => {
    const text = 'User-agent: *\nDisallow: /a\nAllow: /a/b\nDisallow: /a/b/c\n';
    expect(allowed(text, '/a/x')).toBe(false);
    expect(allowed(text, '/a/b/x')).toBe(true);
    expect(allowed(text, '/a/b/c/d')).toBe(false);
  });

  it('on equal length, Allow wins', () => {
    expect(allowed('User-agent: *\nDisallow: /page\nAllow: /page\n', '/page')).toBe(true);
  });

  it('/robots.txt is always allowed', () => {
    expect(allowed('User-agent: *\nDisallow: /\n', '/robots.txt')).toBe(true);
  });

  it('matches against path and query', () => {
    const text = 'User-agent: *\nDisallow: /*?session=\n';
    expect(allowed(text, '/a?session=1')).toBe(false);
    expect(allowed(text, '/a?x=1')).toBe(true);
  });

  it('reports the deciding rule', () => {
    expect(robotsAllows(parseRobots('User-agent: *\nDisallow: /a\n', UA), '/a/b').rule).toEqual({ allow: false, pattern: '/a' });
  });
});

describe('wildcards', () => {
  it.each([
    ['/*.php', '/index.php', true],
    ['/*.php', '/a/b.php?x=1', true],
    ['/*.php', '/index.html', false],
    ['/*.php$', '/index.php', true],
    ['/*.php$', '/index.php?x', false],
    ['/*.php$', '/x.php/y.php', true],
    ['/fish*', '/fishheads', true],
    ['/fish*', '/Fish', false],
    ['/fish$', '/fish', true],
    ['/fish$', '/fishy', false],
    ['/a**b', '/axxb', true],
    ['*', '/anything', true],
    ['/$', '/', true],
    ['/$', '/a', false],
    ['/a*b*c', '/a-b-x-c', true],
    ['/a*b*c', '/a-c-b', false],
  ])('%s vs %s → %s', (pattern, path, expected) => {
    expect(robotsPatternMatches(pattern, path)).toBe(expected);
  });

  it('a hostile pattern does not blow up', () => {
    const pattern = `/${'*a'.repeat(200)}b`;
    const started = performance.now();
    expect(robotsPatternMatches(pattern, `/${'a'.repeat(5000)}`)).toBe(false);
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it.each([
    ['/a*b*c$', '/a-b-c', true],
    ['/a*b*c$', '/a-b-c-c', true],
    ['/a*b*c$', '/a-b-cx', false],
    ['/a*c$', '/ac', true],
    ['/ab*b$', '/ab', false],
    ['/ab*b$', '/abb', true],
    ['/*$', '/x', true],
    ['/a*$', '/a', true],
    ['/a*b', '/ab', true],
    ['/a*bb*bb', '/abbb', false],
    ['/a*bb*bb', '/abbbb', true],
  ])('segments: %s vs %s → %s', (pattern, path, expected) => {
    expect(robotsPatternMatches(pattern, path)).toBe(expected);
  });

  it('a hostile robots.txt (long literal after a wildcard) against a long link decides fast', () => {
    // Each rule cost |path|·|pattern| with the backtracking walk: about 4 s for this file, and
    // minutes for a full 512 KiB one, all of it blocking the daemon's event loop.
    const rule = `Disallow: /*${'a'.repeat(1000)}b\n`;
    const rules = parseRobots(`User-agent: *\n${rule.repeat(50)}`, 'FluxusResearchBot');
    const path = `/${'a'.repeat(4000)}`;
    const started = performance.now();
    expect(robotsAllows(rules, path).allowed).toBe(true);
    expect(robotsAllows(rules, `${path}b`).allowed).toBe(false);
    expect(performance.now() - started).toBeLessThan(500);
  });
});

describe('percent-encoding', () => {
  it('compares non-ASCII and escapes in one form', () => {
    expect(normalizeRobotsPath('/café')).toBe('/caf%C3%A9');
    expect(normalizeRobotsPath('/caf%c3%a9')).toBe('/caf%C3%A9');
    expect(allowed('User-agent: *\nDisallow: /café\n', '/caf%C3%A9/menu')).toBe(false);
    expect(allowed('User-agent: *\nDisallow: /caf%c3%a9\n', '/caf%C3%A9')).toBe(false);
  });
});
