/**
 * What a definition looks like in common languages (JS/TS, Python, Go, Rust, Java-likes), as
 * grep patterns for one term and as a line classifier. Heuristic by nature: it prefers lines
 * that introduce a name over lines that merely use it.
 */
import { escapeRegex } from './terms.js';

const KEYWORDS = 'function|class|def|fn|func|interface|type|enum|struct|trait|const|let|var|module';
/** Keywords that declare something wherever they appear (not plain variables). */
const DECL_KEYWORDS = 'function|class|def|fn|func|interface|type|enum|struct|trait|module';
const CONTROL = new Set(['if', 'for', 'while', 'switch', 'catch', 'return', 'function', 'with', 'elif', 'else', 'do', 'try', 'new', 'typeof', 'await']);

/**
 * A grep pattern (JavaScript regex source, matched case-insensitively) for lines defining a
 * name that contains `stem`:
 *   `function parseCIDR(`, `class Parser`, `def parse_cidr`, `const parseCidr = (…) =>`,
 *   `ipaddr.IPv4.parseCIDR = function (`, `parseCIDR: function`, `exports.parseCIDR`,
 *   `module.exports.parse`, method shorthand `parseCIDR(string) {`.
 */
export function definitionPattern(stem: string): string {
  const name = `[\\w$]*${escapeRegex(stem)}[\\w$]*`;
  return [
    `\\b(?:${KEYWORDS})\\s+\\*?\\s*${name}`,
    `${name}\\s*[:=]\\s*(?:async\\s+)?(?:function\\b|\\([^)]*\\)\\s*=>|[\\w$]+\\s*=>)`,
    `(?:module\\.)?exports\\.${name}`,
    `^\\s*(?:(?:public|private|protected|static|async|export|override|readonly)\\s+)*${name}\\s*\\([^)]*\\)\\s*(?::[^={]+)?\\{`,
  ].join('|');
}

const DEF_LINE = new RegExp(
  [
    `^\\s*(?:export\\s+)?(?:default\\s+)?(?:declare\\s+)?(?:abstract\\s+)?(?:async\\s+)?(?:pub(?:\\([^)]*\\))?\\s+)?(?:${DECL_KEYWORDS})\\s+\\*?\\s*([A-Za-z_$][\\w$]*)`,
    // A plain variable counts only at module level; inside a body it is a local, not an API.
    `^(?:export\\s+)?(?:const|let|var)\\s+([A-Za-z_$][\\w$]*)\\s*(?::[^=]+)?=`,
    `^\\s*(?:export\\s+)?(?:const|let|var)\\s+([A-Za-z_$][\\w$]*)\\s*(?::[^=]+)?=\\s*(?:async\\s+)?(?:function\\b|\\([^)]*\\)\\s*(?::[^=]+)?=>|[\\w$]+\\s*=>)`,
    `^\\s*(?:[\\w$]+\\.)*([A-Za-z_$][\\w$]*)\\s*[:=]\\s*(?:async\\s+)?(?:function\\b|\\([^)]*\\)\\s*=>)`,
    `^\\s*(?:module\\.)?exports\\.([A-Za-z_$][\\w$]*)\\s*=`,
    `^\\s*(?:(?:public|private|protected|static|async|override|readonly)\\s+)*([A-Za-z_$][\\w$]*)\\s*\\([^)]*\\)\\s*(?::[^={]+)?\\{\\s*$`,
  ].join('|'),
  'u',
);

/** The name a line defines, or null when it does not look like a definition. */
export function definedName(text: string): string | null {
  const m = DEF_LINE.exec(text);
  if (!m) return null;
  const name = m.slice(1).find((g) => g !== undefined) ?? null;
  if (name === null || CONTROL.has(name)) return null;
  return name;
}
