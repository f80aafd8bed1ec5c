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

/**
 * What a definition introduces: behaviour (`function refill()`, a method, a function-valued
 * assignment), a type (`class TokenBucket`, `interface`, `enum`), or a value (a module-level
 * constant). A question asking where something is done is answered by behaviour first.
 */
export type DefinitionKind = 'callable' | 'type' | 'value';

export interface Definition {
  name: string;
  kind: DefinitionKind;
}

const TYPE_KEYWORD = /^\s*(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:pub(?:\([^)]*\))?\s+)?(?:class|interface|type|enum|struct|trait|module)\s/u;
/** The right-hand side of `name = …` / `name: …`, when the line assigns one. */
const ASSIGNED = /^[^=:]*?(?:[^=!<>]=(?!=)|:)\s*(.*)$/u;
const FUNCTION_VALUE = /^(?:async\s+)?(?:function\b|\([^)]*\)\s*(?::[^=]+)?=>|[\w$]+\s*=>)/u;
/**
 * Right-hand sides that only name something defined elsewhere: an import (`require('x')`,
 * `import('x')`), a symbol key, another name (`exports.parse = parse`), or a compiler's
 * placeholder (`exports.parse = void 0`). Such a line aliases;
 * it defines nothing a reader would want to be shown.
 */
const ALIAS_VALUE = /^(?:(?:__importDefault|__importStar|_interopRequireDefault)\()?(?:require|import)\s*\(|^Symbol(?:\.for)?\s*\(|^(?:[\w$.]+\s*=\s*)*void 0\s*;?\s*$|^(?!(?:true|false|null|undefined)\b)[A-Za-z_$][\w$]*(?:\.[\w$]+)*\s*;?\s*$/u;

/** The definition a line makes (name and kind), or null when it defines nothing. */
export function definitionOf(text: string): Definition | null {
  if (/^\s*import\b/u.test(text)) return null;
  const m = DEF_LINE.exec(text);
  if (!m) return null;
  const name = m.slice(1).find((g) => g !== undefined) ?? null;
  if (name === null || CONTROL.has(name)) return null;
  if (TYPE_KEYWORD.test(text)) return { name, kind: 'type' };
  if (/^\s*(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:async\s+)?(?:pub(?:\([^)]*\))?\s+)?(?:function|def|fn|func)\b/u.test(text)) return { name, kind: 'callable' };
  const rhs = /^\s*(?:(?:public|private|protected|static|async|override|readonly)\s+)*[\w$]+\s*\([^)]*\)\s*(?::[^={]+)?\{\s*$/u.test(text) ? null : ASSIGNED.exec(text)?.[1]?.trim();
  if (rhs === undefined || rhs === null) return { name, kind: 'callable' };
  if (FUNCTION_VALUE.test(rhs)) return { name, kind: 'callable' };
  if (ALIAS_VALUE.test(rhs)) return null;
  return { name, kind: 'value' };
}

/** The name a line defines, or null when it does not look like a definition. */
export function definedName(text: string): string | null {
  return definitionOf(text)?.name ?? null;
}
