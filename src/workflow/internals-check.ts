/**
 * docs/behaviour.md#c4: the merger's final answer must not mention how it was produced — anonymous candidate
 * ids, children/sandboxes, the evaluator or merger, providers, models or slots.
 *
 * The answer is about a repository or web pages, so ordinary technical words must pass: a data
 * "model", a React "provider", a Node "child process", an expression "evaluator", a company
 * "merger", a GPT (GUID) partition table. Each pattern therefore needs a context that only
 * Fusion talk has (a capital A/B/C after "candidate", "language model", "provider: openai",
 * "blind evaluator", the evaluation contract's own keys, ...). Precision over breadth: a miss
 * is caught by reviewers, a false positive fails a good run.
 *
 * Code (fenced blocks and inline code spans) is not scanned: it is quoted repository text, which
 * may legitimately contain any of these words.
 */

export interface InternalsPattern {
  id: string;
  /** Why this is fusion talk rather than ordinary text. */
  description: string;
  re: RegExp;
}

const VERBS = '(?:says?|said|claims?|claimed|notes?|noted|argues?|argued|suggests?|suggested|reports?|reported|cites?|cited|finds|found|agrees?|agreed|disagrees?|disagreed|proposes?|proposed|states?|stated|mentions?|mentioned|answers?|answered|missed|misses|got|gets)';
const LETTER_LIST = '[ABC](?:\\s*(?:,\\s*(?:and\\s+|or\\s+)?|\\s+and\\s+|\\s+or\\s+|\\s*&\\s*|\\s*/\\s*)[ABC])*';
const PAREN_LIST = '\\([ABC]\\)(?:\\s*(?:,\\s*(?:and\\s+)?|\\s+and\\s+|\\s+or\\s+|\\s*&\\s*|\\s*/\\s*)\\([ABC]\\))*';

/** Every pattern; all are global so every occurrence is reported. */
export const INTERNALS_PATTERNS: readonly InternalsPattern[] = [
  {
    id: 'anonymous_id',
    description: '"candidate A", "Answer B", "responses A and C": a role noun followed by a capital A/B/C (lowercase "a" is the article).',
    re: new RegExp(`\\b(?:[Cc]andidate|[Aa]nswer|[Rr]esponse|[Ii]nvestigator|[Rr]espondent)s?\\s+${LETTER_LIST}\\b(?![-'’]\\w)`, 'g'),
  },
  {
    id: 'anonymous_id_possessive',
    description: '"A\'s answer", "C’s finding".',
    re: /\b[ABC]['’]s\s+(?:answer|response|claim|finding|citation|analysis|conclusion|position)s?\b/g,
  },
  {
    id: 'anonymous_id_parenthesised',
    description: '"(A) says", "(B) and (C) agree", "according to (C)": a bare (A)/(B)/(C) used as a speaker, not as an enumeration label.',
    re: new RegExp(`(?:${PAREN_LIST}\\s+${VERBS}\\b|\\b(?:[Aa]ccording to|[Pp]er|(?:noted|stated|found|claimed|reported|suggested) (?:by|in))\\s+${PAREN_LIST})`, 'g'),
  },
  {
    id: 'candidate_plural',
    description: '"the three candidates", "candidate answers": the answers themselves. "the candidates", "both candidates", "other candidates" are ordinary (search candidates) and not flagged.',
    re: /\b(?:three\s+candidates|candidate\s+(?:answers?|responses?))\b/gi,
  },
  {
    id: 'child',
    description: '"sandbox child", "child sandbox", "fusion child", "child agent", "three children". A plain "child process" is NOT flagged: repositories discuss child processes.',
    re: /\b(?:sandbox(?:ed)?\s+child(?:ren)?|child(?:ren)?\s+sandbox(?:es)?|fusion\s+child(?:ren)?|candidate\s+child(?:ren)?|child\s+agents?|(?:three|3)\s+(?:children|child\s+process(?:es)?))\b/gi,
  },
  {
    id: 'evaluator',
    description: '"blind evaluator/evaluation", "the evaluator said/found/...", "synthesis plan", and the evaluation contract\'s keys. A plain "evaluator" (expression evaluator) is not flagged.',
    re: /\b(?:blind\s+evaluat(?:or|ion)s?|(?:the|an?)\s+evaluator(?:['’]s)?\s+(?:said|says|noted|notes|found|finds|judged|flagged|recommended|recommends|preferred|prefers|ranked|scored|assessment|plan|verdict)|synthesis\s+plan|candidate_assessments|candidate_id|must_include|must_resolve|must_avoid|useful_contributions)\b/gi,
  },
  {
    id: 'merger',
    description: '"the merger model/agent/stage", "as the merger": the stage, not a company merger.',
    re: /\b(?:merger\s+(?:model|agent|stage|step|prompt|role)s?|(?:as|I am)\s+the\s+merger|merge\s+stage)\b/gi,
  },
  {
    id: 'provider',
    description: '"provider openai", "provider: anthropic": a provider slot naming an LLM vendor. A plain "provider" is not flagged.',
    re: /\bproviders?\s*[:=]?\s*["'`]?(?:openai|anthropic|mistral|ollama|openrouter|deepseek|xai|groq|bedrock|builtin)\b/gi,
  },
  {
    id: 'model_phrase',
    description: '"language model", "AI model", "the model said", "builtin engine", "model slot". A plain "model" (data model, ORM model) is not flagged.',
    re: /\b(?:(?:large\s+)?language\s+models?|AI\s+(?:model|assistant)s?|(?:the|a|another|other|each)\s+models?\s+(?:said|says|answered|claimed|claims|suggested|thinks|thought|believes|believed|agreed|disagreed)|builtin\s+engine|model\s+slots?)\b/gi,
  },
  {
    id: 'model_name',
    description: '"LLM", "ChatGPT", "GPT-4o", "GPT model", "Claude" (case-sensitive). A bare "GPT" (GUID partition table) is not flagged.',
    re: /\b(?:LLMs?|ChatGPT|GPT-?\d[\w.]*|GPT\s+models?|Claude(?!\s+(?:Shannon|Monet|Debussy)))\b/g,
  },
  {
    id: 'slot',
    description: '"slot 1", "slots 2 and 3", "candidate slot".',
    re: /\b(?:slots?\s+[123](?:\s*(?:,|and|&|\/)\s*[123])*|candidate\s+slots?)\b(?![.\d])/gi,
  },
  {
    id: 'fusion',
    description: '"fusion internals", "fusion run/workflow/candidate/evaluator/merger".',
    re: /\bfusion\s+(?:internals?|runs?|workflows?|candidates?|evaluators?|mergers?|pipeline)\b/gi,
  },
];

/** Blanks fenced code blocks and inline code spans, keeping line structure. */
export function stripCode(markdown: string): string {
  const lines = markdown.split('\n');
  let fence: string | undefined;
  const out = lines.map((line) => {
    const m = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (fence !== undefined) {
      if (m !== null && m[1] !== undefined && m[1][0] === fence[0] && m[1].length >= fence.length) fence = undefined;
      return '';
    }
    if (m !== null && m[1] !== undefined) {
      fence = m[1];
      return '';
    }
    // Inline code: a run of N backticks closes at the next run of exactly N backticks.
    return line.replace(/(`+)(?!`)[\s\S]*?(?<!`)\1(?!`)/g, ' ');
  });
  return out.join('\n');
}

/**
 * The offending phrases in `answer`, in order of appearance, each reported once (as written,
 * whitespace collapsed). Empty when the answer is clean.
 */
export function findFusionInternals(answer: string): string[] {
  const text = stripCode(answer);
  const spans: Array<{ start: number; end: number }> = [];
  for (const pattern of INTERNALS_PATTERNS) {
    for (const m of text.matchAll(pattern.re)) spans.push({ start: m.index, end: m.index + m[0].length });
  }
  spans.sort((a, b) => a.start - b.start || b.end - a.end);
  // Overlapping matches of different patterns are one phrase ("candidates A and B" inside
  // "three candidates A and B").
  const merged: Array<{ start: number; end: number }> = [];
  for (const span of spans) {
    const last = merged[merged.length - 1];
    if (last !== undefined && span.start < last.end) last.end = Math.max(last.end, span.end);
    else merged.push({ ...span });
  }
  const seen = new Set<string>();
  const out: string[] = [];
  for (const { start, end } of merged) {
    const phrase = text.slice(start, end).replace(/\s+/g, ' ').trim();
    if (seen.has(phrase)) continue;
    seen.add(phrase);
    out.push(phrase);
  }
  return out;
}
