/**
 * Registry of the candidate tools and their function definitions for a model.
 * Node builtins only: this code runs inside the sandbox.
 */
import { findTool } from './find.js';
import { grepTool } from './grep.js';
import { lsTool } from './ls.js';
import { readTool } from './read.js';
import type { ToolImpl, ToolLimits, ToolName, ToolResult } from './types.js';
import { ARG_LIMITS } from './types.js';

export type { ToolImpl, ToolLimits, ToolName, ToolResult } from './types.js';
export { DEFAULT_TOOL_LIMITS } from './types.js';

export const TOOLS: Readonly<Record<ToolName, ToolImpl>> = Object.freeze({
  read: readTool,
  grep: grepTool,
  find: findTool,
  ls: lsTool,
});

export interface JsonSchemaObject {
  type: 'object';
  properties: Record<string, Record<string, unknown>>;
  required: string[];
  additionalProperties: false;
}

export interface ToolSpec {
  name: ToolName;
  description: string;
  parameters: JsonSchemaObject;
}

const PATH_HINT = 'Repository-relative path (e.g. "src/index.ts"); absolute paths must lie inside the repository.';

const SPECS: ToolSpec[] = [
  {
    name: 'read',
    description:
      'Read a text file. Output lines are "<line>\\t<text>" (1-based line numbers, like cat -n); ' +
      'cite them as path:line. Long files are paged with offset/limit; a trailing "[...]" note ' +
      'says where to continue. Refuses directories and binary files.',
    parameters: {
      type: 'object',
      properties: {
        path: { type: 'string', description: PATH_HINT },
        offset: { type: 'integer', minimum: 1, description: 'First line to show (1-based). Default 1.' },
        limit: {
          type: 'integer',
          minimum: 1,
          maximum: ARG_LIMITS.readMaxLines,
          description: `Number of lines to show. Default ${ARG_LIMITS.readDefaultLines}.`,
        },
      },
      required: ['path'],
      additionalProperties: false,
    },
  },
  {
    name: 'grep',
    description:
      'Search file contents with a JavaScript regular expression. Output lines are "path:line:text" ' +
      '(text cut to 300 characters). Skips binary files, files over 1 MiB, .git and node_modules ' +
      '(unless path points inside them). Trailing "[...]" notes report limits and skipped files.',
    parameters: {
      type: 'object',
      properties: {
        pattern: { type: 'string', description: 'JavaScript regular expression source, matched per line (e.g. "function\\\\s+main").' },
        path: { type: 'string', description: `File or directory to search. Default: the repository root. ${PATH_HINT}` },
        glob: {
          type: 'string',
          description: 'Only search files whose path matches this glob (e.g. "**/*.ts", "*.{js,ts}", "src/**"). A glob without "/" matches file names at any depth.',
        },
        ignore_case: { type: 'boolean', description: 'Case-insensitive matching. Default false.' },
        max_matches: {
          type: 'integer',
          minimum: 1,
          maximum: ARG_LIMITS.grepMaxMatches,
          description: `Maximum matching lines to return. Default ${ARG_LIMITS.grepDefaultMatches}.`,
        },
      },
      required: ['pattern'],
      additionalProperties: false,
    },
  },
  {
    name: 'find',
    description:
      'Find files and directories by glob. Output: repository-relative paths, sorted, one per line; ' +
      'directories end with "/". Supports *, **, ?, {a,b} and [classes]; a pattern without "/" ' +
      'matches names at any depth. Skips .git and node_modules unless path points inside them.',
    parameters: {
      type: 'object',
      properties: {
        pattern: { type: 'string', description: 'Glob, e.g. "*.ts", "src/**/*.test.ts", "**/README*".' },
        path: { type: 'string', description: `Directory to search. Default: the repository root. ${PATH_HINT}` },
        max_results: {
          type: 'integer',
          minimum: 1,
          maximum: ARG_LIMITS.findMaxResults,
          description: `Maximum paths to return. Default ${ARG_LIMITS.findDefaultResults}.`,
        },
        type: { type: 'string', enum: ['file', 'dir'], description: 'Only files or only directories.' },
      },
      required: ['pattern'],
      additionalProperties: false,
    },
  },
  {
    name: 'ls',
    description:
      'List one directory: entry names sorted, one per line; directories end with "/", symbolic links with "@" (not followed).',
    parameters: {
      type: 'object',
      properties: {
        path: { type: 'string', description: `Directory to list. Default: the repository root. ${PATH_HINT}` },
      },
      required: [],
      additionalProperties: false,
    },
  },
];

/** Function definitions in a model-neutral shape: `{ name, description, parameters }`. */
export const TOOL_SPECS: readonly ToolSpec[] = Object.freeze(SPECS);

export function isToolName(name: string): name is ToolName {
  return Object.prototype.hasOwnProperty.call(TOOLS, name);
}

/** Run a tool by name; an unknown name or an unexpected throw comes back as `{ ok: false }`. */
export async function runTool(name: string, root: string, args: unknown, limits?: Partial<ToolLimits>): Promise<ToolResult> {
  if (!isToolName(name)) return { ok: false, error: `unknown tool: ${JSON.stringify(name.slice(0, 100))}` };
  try {
    return await TOOLS[name](root, args, limits);
  } catch {
    return { ok: false, error: `${name}: failed` };
  }
}
