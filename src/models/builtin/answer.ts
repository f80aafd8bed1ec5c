/**
 * The candidate answer format shared by the three search strategies, and the one no-tool
 * compression turn. Every finding is a `path:line` citation whose quote is the exact line
 * text (trimmed) taken from a tool result, so a mechanical check can verify it.
 */
import { OUTPUT_CAPS } from '../../contracts/constants.js';
import { definedName } from './definitions.js';
import type { Term } from './terms.js';
import { termWeight, termsIn } from './terms.js';
import { lineRank } from './lead.js';
import { pathPrior } from './tool-output.js';

export interface Finding {
  path: string;
  line: number;
  /** The line exactly as a tool showed it (untrimmed). */
  text: string;
  kind: 'definition' | 'usage' | 'path match' | 'file head';
  /** What makes the line relevant beyond the terms (e.g. the name it defines). */
  note?: string;
}

/** Markdown inline code for arbitrary text (a longer fence when the text contains backticks). */
export function codeSpan(text: string): string {
  let longest = 0;
  for (const m of text.matchAll(/`+/gu)) longest = Math.max(longest, m[0].length);
  if (longest === 0) return `\`${text}\``;
  const fence = '`'.repeat(longest + 1);
  return `${fence} ${text} ${fence}`;
}

export function citationOf(f: { path: string; line: number }): string {
  return `${f.path}:${f.line}`;
}

export function findingScore(f: Finding, terms: readonly Term[]): number {
  const matched = termsIn(f.text, terms);
  const name = f.kind === 'definition' ? definedName(f.text) : null;
  // A definition whose name carries the terms (`parseCIDR`) beats one that merely sits near them.
  return termWeight(matched) * (f.kind === 'definition' ? 1.5 : 1) + matched.length + (name === null ? 0 : 2 * termWeight(termsIn(name, terms)));
}

/**
 * Up to `n` lines, greedily: each pick maximises (weight of terms not yet covered × 2 + its own
 * score), so the chosen lines together cover as many request terms as possible. Returned in
 * line order.
 */
export function pickLines<L extends { line: number; text: string }>(lines: readonly L[], terms: readonly Term[], n: number, score: (text: string) => number): L[] {
  const chosen: L[] = [];
  const covered = new Set<Term>();
  const rest = lines.filter((l) => termsIn(l.text, terms).length > 0);
  while (chosen.length < n && rest.length > 0) {
    let bestIndex = 0;
    let bestValue = -Infinity;
    rest.forEach((l, i) => {
      const fresh = termsIn(l.text, terms).filter((t) => !covered.has(t));
      const value = termWeight(fresh) * 2 + score(l.text);
      if (value > bestValue || (value === bestValue && l.line < (rest[bestIndex] as L).line)) {
        bestValue = value;
        bestIndex = i;
      }
    });
    const [picked] = rest.splice(bestIndex, 1) as [L];
    chosen.push(picked);
    for (const t of termsIn(picked.text, terms)) covered.add(t);
  }
  return chosen.sort((a, b) => a.line - b.line);
}

/** Keep the first finding per `path:line`, in order. */
export function dedupeFindings(findings: readonly Finding[]): Finding[] {
  const seen = new Set<string>();
  return findings.filter((f) => {
    const key = citationOf(f);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

function reasonOf(f: Finding, terms: readonly Term[]): string {
  const matched = termsIn(f.text, terms);
  const parts: string[] = [f.kind];
  if (f.note) parts.push(f.note);
  parts.push(matched.length > 0 ? `matches ${matched.map((t) => t.word).join(', ')}` : 'no request term on this line');
  return parts.join('; ');
}

export function renderFinding(f: Finding, terms: readonly Term[]): string {
  return [`- ${codeSpan(citationOf(f))} — ${reasonOf(f, terms)}`, `  > ${codeSpan(f.text.trim())}`].join('\n');
}

interface FileEvidence {
  path: string;
  findings: Finding[];
  terms: Set<Term>;
  score: number;
  definitions: number;
}

/** Files ranked by the request terms their findings cover, then by finding strength. */
export function rankFiles(findings: readonly Finding[], terms: readonly Term[]): FileEvidence[] {
  const files = new Map<string, FileEvidence>();
  for (const f of findings) {
    let ev = files.get(f.path);
    if (!ev) {
      ev = { path: f.path, findings: [], terms: new Set(), score: 0, definitions: 0 };
      files.set(f.path, ev);
    }
    ev.findings.push(f);
    for (const t of termsIn(f.text, terms)) ev.terms.add(t);
    ev.score += findingScore(f, terms);
    if (f.kind === 'definition') ev.definitions += 1;
  }
  // A file is as good as its best line (lead.ts: a definition of the asked behaviour first),
  // plus a share of the terms its lines cover; source files outrank docs that describe them.
  const best = new Map<string, number>();
  for (const f of findings) best.set(f.path, Math.max(best.get(f.path) ?? 0, lineRank(f, terms, findings)));
  const key = (e: FileEvidence): number => (best.get(e.path) ?? 0) + 0.5 * termWeight([...e.terms]) * pathPrior(e.path);
  return [...files.values()].sort((a, b) => key(b) - key(a) || b.definitions - a.definitions || b.score - a.score || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

export interface CandidateAnswer {
  method: string;
  terms: readonly Term[];
  findings: readonly Finding[];
  /** How many files contain each term (lead.ts `rarityLine`), for the merger to weigh terms by. */
  rarity?: string;
  /** Failed tool calls worth telling the reader about. */
  problems?: readonly string[];
}

/** The answer first (the most likely file and its key line, cited and quoted), then the evidence. */
export function renderCandidateAnswer(a: CandidateAnswer): string {
  const { terms } = a;
  const findings = dedupeFindings(a.findings);
  const out: string[] = ['## Summary', ''];
  const ranked = rankFiles(findings, terms);
  const best = ranked[0];
  if (best) {
    const key = [...best.findings].sort((x, y) => lineRank(y, terms, findings) - lineRank(x, terms, findings) || findingScore(y, terms) - findingScore(x, terms) || x.line - y.line)[0];
    const def = key?.kind === 'definition' ? key : undefined;
    const covered = [...best.terms];
    out.push(
      `The most likely file is ${codeSpan(best.path)}: ${best.findings.length} cited ${best.findings.length === 1 ? 'line matches' : 'lines match'} ` +
        `${covered.length} of ${terms.length} search terms (${covered.map((t) => t.word).join(', ') || 'none'}).` +
        (key ? ` The strongest evidence is line ${key.line}${def ? `, a definition${def.note ? ` (${def.note})` : ''}` : ''}:` : ''),
    );
    if (key) out.push('', `- ${codeSpan(citationOf(key))}`, `  > ${codeSpan(key.text.trim())}`);
    const others = ranked.slice(1, 4);
    if (others.length > 0) {
      out.push('', `Other files with evidence: ${others.map((o) => `${codeSpan(o.path)} (${o.findings.length} ${o.findings.length === 1 ? 'line' : 'lines'})`).join(', ')}.`);
    }
  } else {
    out.push('No file could be tied to the request with the available evidence.');
  }

  out.push('', '## Findings', '');
  out.push(`Search terms: ${terms.length > 0 ? terms.map((t) => codeSpan(t.word)).join(', ') : '(none could be derived from the request)'}.`);
  out.push(`Method: ${a.method}`);
  if (a.rarity !== undefined) out.push(a.rarity);
  out.push('');
  if (findings.length === 0) out.push('No line in the repository matched the search terms.');
  for (const f of findings) out.push(renderFinding(f, terms));

  const found = new Set(findings.flatMap((f) => termsIn(f.text, terms)));
  const missing = terms.filter((t) => !found.has(t));
  if (findings.length === 0 || missing.length > 0 || (a.problems?.length ?? 0) > 0) {
    out.push('', '## Not verified', '');
    if (findings.length === 0) out.push('- Nothing in the repository could be cited for this request.');
    if (missing.length > 0) out.push(`- No cited line contains: ${missing.map((t) => codeSpan(t.word)).join(', ')}.`);
    for (const p of a.problems ?? []) out.push(`- ${p}`);
  }
  return `${out.join('\n')}\n`;
}

/** The size the child measures (docs/behaviour.md#b8): bytes of the JSON string. */
export function capBytes(text: string): number {
  return Buffer.byteLength(JSON.stringify(text));
}

/**
 * The compression turn: keep every finding (citation + quote lines), the first paragraph of the
 * summary with its cited key line, and the "not verified" bullets; drop everything else; then drop findings from the end
 * until the answer fits the candidate cap.
 */
export function compressAnswer(previous: string, capBytesLimit: number = OUTPUT_CAPS.candidateBytes): string {
  const sections: { heading: string; lines: string[] }[] = [];
  let current: { heading: string; lines: string[] } | null = null;
  for (const line of previous.split('\n')) {
    if (/^#{1,6}\s/u.test(line)) {
      current = { heading: line, lines: [] };
      sections.push(current);
    } else if (current) {
      current.lines.push(line);
    }
  }
  if (sections.length === 0) {
    // Not in the findings format: keep whole lines from the top while they fit.
    const lines = previous.split('\n');
    while (lines.length > 1 && capBytes(lines.join('\n')) > capBytesLimit) lines.pop();
    return lines.join('\n');
  }
  const isBullet = (l: string): boolean => /^[-*]\s/u.test(l);
  const isQuote = (l: string): boolean => /^\s*>/u.test(l);
  const kept = sections.map((sec) => {
    const h = sec.heading.toLowerCase();
    if (h.includes('summary')) {
      // The answer's first sentence and its cited key line.
      const first = sec.lines.findIndex((l) => l.trim() !== '');
      return { heading: sec.heading, lines: first < 0 ? [] : [sec.lines[first] as string, ...sec.lines.slice(first + 1).filter((l) => isBullet(l) || isQuote(l))] };
    }
    return { heading: sec.heading, lines: sec.lines.filter((l) => isBullet(l) || isQuote(l) || l.startsWith('Term rarity')) };
  });
  const render = (): string => `${kept.map((sec) => [sec.heading, '', ...sec.lines].join('\n')).join('\n\n')}\n`;
  let text = render();
  while (capBytes(text) > capBytesLimit) {
    // Drop the last bullet (with its quote lines) of the longest section.
    const sec = [...kept].sort((a, b) => b.lines.length - a.lines.length)[0];
    if (!sec || sec.lines.length === 0) break;
    let start = sec.lines.length - 1;
    while (start > 0 && !isBullet(sec.lines[start] as string)) start -= 1;
    sec.lines.splice(start);
    text = render();
  }
  return text;
}
