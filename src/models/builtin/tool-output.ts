/**
 * Parsers for the candidate tools' text output (sandbox/tools): exactly the formats they
 * produce, ignoring their trailing `[...]` notes.
 *   read  `<lineNo>\t<text>`      grep  `path:line:text` (text cut to 300 chars + `…`)
 *   find  one path per line, directories end with `/`
 *   ls    one entry per line, directories end with `/`, symlinks with `@`
 */

export interface Hit {
  path: string;
  line: number;
  /** The line as shown (untrimmed). */
  text: string;
  /** grep cut the line: its text is not the whole line and must not be quoted. */
  cut: boolean;
}

/** grep cuts lines longer than this many characters and appends `…`. */
const GREP_LINE_CHARS = 300;

function isNote(line: string): boolean {
  return line.startsWith('[') && line.endsWith(']');
}

export function parseGrep(text: string): Hit[] {
  const hits: Hit[] = [];
  for (const line of text.split('\n')) {
    const m = /^(.+?):(\d+):(.*)$/su.exec(line);
    if (!m) continue;
    const body = m[3] as string;
    hits.push({ path: m[1] as string, line: Number(m[2]), text: body, cut: body.length > GREP_LINE_CHARS && body.endsWith('…') });
  }
  return hits;
}

export interface ReadLine {
  line: number;
  text: string;
}

export function parseRead(text: string): ReadLine[] {
  const out: ReadLine[] = [];
  for (const line of text.split('\n')) {
    const tab = line.indexOf('\t');
    if (tab <= 0) continue;
    const num = line.slice(0, tab);
    if (!/^\d+$/u.test(num)) continue;
    out.push({ line: Number(num), text: line.slice(tab + 1) });
  }
  return out;
}

export function parseFind(text: string): { files: string[]; dirs: string[] } {
  const files: string[] = [];
  const dirs: string[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trimEnd();
    if (line === '' || isNote(line)) continue;
    if (line.endsWith('/')) dirs.push(line.slice(0, -1));
    else files.push(line);
  }
  return { files, dirs };
}

export function parseLs(text: string): { files: string[]; dirs: string[] } {
  const files: string[] = [];
  const dirs: string[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trimEnd();
    if (line === '' || isNote(line)) continue;
    if (line.endsWith('/')) dirs.push(line.slice(0, -1));
    else if (!line.endsWith('@')) files.push(line);
  }
  return { files, dirs };
}

const SOURCE_EXT = /\.(?:[cm]?[jt]sx?|py|go|rs|java|kt|kts|scala|rb|php|cs|swift|c|h|cc|cpp|cxx|hpp|hh|m|mm|lua|pl|pm|sh|bash|zsh|ex|exs|erl|hs|ml|mli|clj|cljs|dart|r|jl|zig|nim|vue|svelte|sql)$/iu;
const DOC_EXT = /\.(?:md|markdown|rst|txt|adoc|html?)$/iu;
const TEST_PATH = /(?:^|\/)(?:tests?|__tests__|spec|specs|fixtures?|examples?|bench(?:marks?)?|e2e)(?:\/|$)|[._-](?:test|spec)\.[^/]+$/iu;
const DECLARATION = /\.d\.[cm]?ts$/iu;
const GENERATED = /(?:^|\/)(?:dist|build|out|coverage|vendor|target)\/|\.min\.[^/]+$|\.map$|(?:^|\/)(?:package-lock\.json|yarn\.lock|pnpm-lock\.yaml)$/iu;

/**
 * How likely a path holds an implementation, as a multiplier: source files first, then
 * declarations and docs, tests and generated files last. A question about where something
 * happens is answered by the code that does it, not by the text describing it.
 */
export function pathPrior(path: string): number {
  let prior = 1;
  if (DECLARATION.test(path)) prior = 0.7;
  else if (SOURCE_EXT.test(path)) prior = 1.3;
  else if (DOC_EXT.test(path)) prior = 0.6;
  if (TEST_PATH.test(path)) prior *= 0.45;
  if (GENERATED.test(path)) prior *= 0.4;
  return prior;
}

export function isSourcePath(path: string): boolean {
  return SOURCE_EXT.test(path) && !DECLARATION.test(path);
}

/** Lines too long or empty are poor quotes: a citation must be checkable by eye. */
export function quotable(text: string): boolean {
  const t = text.trim();
  return t.length >= 3 && t.length <= 400;
}
