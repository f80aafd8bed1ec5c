// Flat config: typescript-eslint's recommended rules over every TypeScript source, and the
// layering of docs/architecture.md#dependency-rules (no import cycles, no import against the
// layer order, no daemon code or npm package in the sandbox child).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

/**
 * The layer order, bottom first (docs/architecture.md#layers). A file may import from its own
 * layer's folder and from lower layers, never from a higher one. Folders in the same layer do not
 * import each other, except where a later entry of the same row says so (none today).
 */
export const LAYERS = [
  ['src/errors.ts', 'src/log.ts', 'src/common'],
  ['src/contracts'],
  ['src/http'],
  ['src/store', 'src/egress', 'src/models', 'src/launcher', 'src/metrics'],
  ['src/broker', 'src/research', 'src/search'],
  ['src/bundles'],
  ['src/tasks'],
  ['src/audit'],
  ['src/workflow'],
  ['src/api', 'src/maintenance', 'src/instrument.ts'],
  ['src/daemon'],
  ['src/main.ts', 'src/config'],
  ['src/client'],
  ['src/mcp'],
  ['src/cli'],
];

// The plugin's TypeScript settings, with the resolver-next entry below in place of its legacy one.
const importXTsSettings = { ...importX.flatConfigs.typescript.settings };
delete importXTsSettings['import-x/resolver'];

const asPath = (p) => `./${p}`;
const layerZones = LAYERS.flatMap((row, level) => {
  const higher = LAYERS.slice(level + 1).flat();
  return row.map((folder) => {
    const siblings = row.filter((other) => other !== folder);
    return {
      target: asPath(folder),
      from: [...higher, ...siblings].map(asPath),
      message: `${folder} imports only lower layers (docs/architecture.md#layers), not this one or a sibling of its own layer: move the shared piece down instead.`,
    };
  });
}).filter((zone) => zone.from.length > 0);

const sandboxZones = [
  {
    // The child image carries the import closure of sandbox/ only (docs/architecture.md#rule-4).
    target: ['./sandbox', './jobs'],
    from: './src',
    except: ['./contracts', './common'],
    message: 'Sandbox and stage-worker code imports only src/contracts/, src/common/, node builtins and its own folder.',
  },
  { target: './src', from: './jobs', message: 'jobs/ are Bree entries, started by path, never imported.' },
];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', 'test/fixtures/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'off',
    },
  },
  {
    files: ['src/**/*.ts', 'sandbox/**/*.ts', 'jobs/**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      // The plugin's TypeScript settings (which files it parses to follow imports) with the TS resolver.
      ...importXTsSettings,
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.json' })],
    },
    rules: {
      // Value imports only: `import type` is erased at build time and cannot form a runtime cycle.
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'import-x/no-restricted-paths': ['error', { basePath: import.meta.dirname, zones: [...layerZones, ...sandboxZones] }],
    },
  },
  {
    // The child runs with no node_modules: node builtins and relative files only.
    files: ['sandbox/**/*.ts', 'jobs/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{ regex: '^(?!node:|\\.{1,2}/)', message: 'Sandbox code imports no npm package (the child image has none): node: builtins and relative files only.' }],
      }],
    },
  },
  {
    // Tests poke at JSON replies and error objects; `any` there costs nothing and reads better.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // Only the composition root and the CLI may read the environment or exit (docs/architecture.md rule 5).
    files: ['src/**/*.ts'],
    ignores: ['src/main.ts', 'src/cli/**', 'src/config/**'],
    rules: {
      'no-restricted-properties': ['error',
        { object: 'process', property: 'env', message: 'Only src/main.ts, src/cli/ and src/config/ read process.env.' },
        { object: 'process', property: 'exit', message: 'Only src/main.ts, src/cli/ and src/config/ call process.exit.' }],
    },
  },
);
