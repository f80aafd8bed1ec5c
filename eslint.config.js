// Flat config: typescript-eslint's recommended rules over every TypeScript source, and every rule
// of docs/architecture.md#dependency-rules (no import cycles, no import against the layer order,
// leaves that stay leaves, ports not adapters in the workflow and task layers, each driver only in
// its adapter, the metrics registry only in src/instrument.ts and the /metrics route, no daemon code or npm package in the sandbox child, environment and signals only at
// the edges), and comments that stand alone (docs/architecture.md#comments).
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
  ['src/common'],
  ['src/errors.ts', 'src/log.ts'],
  ['src/contracts'],
  ['src/http'],
  ['src/store', 'src/egress', 'src/models', 'src/launcher', 'src/metrics', 'src/queue'],
  ['src/broker', 'src/research', 'src/search'],
  ['src/bundles'],
  ['src/tasks'],
  ['src/audit'],
  ['src/workflow'],
  ['src/api', 'src/maintenance', 'src/instrument.ts'],
  ['src/dashboard'],
  ['src/daemon'],
  ['src/main.ts', 'src/config'],
  ['src/client'],
  ['src/mcp'],
  ['src/cli'],
];

/**
 * Rule 2 (docs/architecture.md#rule-2): the workflow and task layers see the adapters through their
 * ports; the concrete adapters are built in src/main.ts and passed in. These are the modules that
 * build or are an adapter (helpers beside them, like launcher/attempt-dirs.ts, stay importable).
 */
export const CONCRETE_ADAPTERS = [
  'src/store/sqlite-store.ts', 'src/store/sqlite-db.ts', 'src/store/pg-db.ts', 'src/store/pg-store.ts',
  'src/store/pg-signals.ts', 'src/store/pg-leases.ts', 'src/store/pg-session.ts', 'src/store/data-dir-lock.ts',
  'src/store/research-sqlite-store.ts', 'src/store/research-memory-store.ts',
  'src/launcher/bwrap.ts', 'src/launcher/docker.ts', 'src/launcher/gvisor.ts', 'src/launcher/factories.ts', 'src/launcher/select.ts',
  'src/models/openai.ts', 'src/models/anthropic.ts', 'src/models/remote-provider.ts', 'src/models/builtin',
  'src/egress/guarded-fetch.ts',
];

/**
 * Rule 3 (docs/architecture.md#rule-3): each driver is imported only by the adapter that wraps it,
 * so nothing above the adapter sees its types or errors. `typeOnly` files may import its types.
 */
export const PACKAGE_OWNERS = [
  { packages: ['sqlite3', 'pg'], owners: ['src/store/**'], why: 'SQL lives only in src/store/: go through the Store port' },
  { packages: ['dockerode'], owners: ['src/launcher/docker.ts'], typeOnly: ['src/launcher/docker-config.ts'], why: 'dockerode is imported only by src/launcher/docker.ts: go through the Launcher port' },
  { packages: ['undici'], owners: ['src/egress/**', 'src/models/**'], why: 'undici is imported only in src/egress/ and src/models/: fetch through the egress guard or a ModelProvider' },
  { packages: ['ipaddr.js'], owners: ['src/contracts/address-class.ts'], why: 'ipaddr.js is imported only by the one address classifier, src/contracts/address-class.ts: classify through it' },
  { packages: ['bullmq'], owners: ['src/research/queue-dispatch.ts', 'src/tasks/queue-dispatch.ts', 'src/queue/**'], why: 'bullmq is imported only by the two queue adapters and src/queue/' },
];

/**
 * Rule 3 (docs/architecture.md#rule-3) for the project's own modules: a module only its owners
 * may import. Checked on the resolved file (however the import is written, a type import too).
 */
export const MODULE_OWNERS = [
  {
    module: 'src/metrics/registry.ts',
    owners: ['src/instrument.ts', 'src/api/metrics.ts'],
    why: 'The metrics registry is imported only by src/instrument.ts (the wrappers and observers the composition root passes down) and the /metrics route (src/api/metrics.ts): report through an observer that instrument.ts implements',
  },
];

/** A string that reads as SQL (rule 3: SQL lives only in src/store/). */
const SQL_TEXT = '/\\b(SELECT\\s[^;]*\\bFROM|INSERT\\s+INTO|UPDATE\\s+\\w+\\s+SET|DELETE\\s+FROM|(CREATE|ALTER|DROP)\\s+(TABLE|INDEX|UNIQUE\\s+INDEX)|PRAGMA\\s+\\w+)\\b/';

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
  { target: './src', from: './jobs', message: 'jobs/ are worker-thread entries (the stage worker, the maintenance tick), started by path, never imported.' },
];

const portZones = [{
  target: ['./src/workflow', './src/tasks'],
  from: CONCRETE_ADAPTERS.map(asPath),
  message: 'The workflow and task layers see adapters through their ports; src/main.ts builds the adapter and passes it in (docs/architecture.md#rule-2).',
}];

/** Every path zone for the files matched by `glob`: the module rules of the modules it does not own. */
function pathZones(glob) {
  const moduleZones = MODULE_OWNERS.filter((owner) => !owner.owners.includes(glob)).map((owner) => ({
    target: './src',
    from: asPath(owner.module),
    message: `${owner.why} (docs/architecture.md#rule-3).`,
  }));
  return [...layerZones, ...sandboxZones, ...portZones, ...moduleZones];
}
const pathRule = (glob) => ['error', { basePath: import.meta.dirname, zones: pathZones(glob) }];

/** The options of @typescript-eslint/no-restricted-imports for the files matched by `glob`. */
function packageRule(glob) {
  const paths = [];
  const patterns = [];
  for (const owner of PACKAGE_OWNERS) {
    if (owner.owners.includes(glob)) continue;
    const allowTypeImports = (owner.typeOnly ?? []).includes(glob);
    const message = `${owner.why} (docs/architecture.md#rule-3).`;
    for (const name of owner.packages) paths.push({ name, message, allowTypeImports });
    patterns.push({ group: owner.packages.map((name) => `${name}/*`), message, allowTypeImports });
  }
  return ['error', { paths, patterns }];
}
/** The options of fusion/owned-dynamic-imports for the files matched by `glob` (a type-only owner may not `import()` either). */
function dynamicRule(glob) {
  const packages = PACKAGE_OWNERS.filter((owner) => !owner.owners.includes(glob))
    .flatMap((owner) => owner.packages.map((name) => ({ name, message: `${owner.why} (docs/architecture.md#rule-3).` })));
  return ['error', packages];
}
const asTsGlob = (glob) => (glob.endsWith('/**') ? `${glob}/*.ts` : glob);
const packageConfigs = [
  { files: ['src/**/*.ts'], rules: { '@typescript-eslint/no-restricted-imports': packageRule(null), 'fusion/owned-dynamic-imports': dynamicRule(null) } },
  ...PACKAGE_OWNERS.flatMap((owner) => [...owner.owners, ...(owner.typeOnly ?? [])]).map((glob) => ({
    files: [asTsGlob(glob)],
    rules: { '@typescript-eslint/no-restricted-imports': packageRule(glob), 'fusion/owned-dynamic-imports': dynamicRule(glob) },
  })),
];

/**
 * Rule 3 for `import('pkg')`: no-restricted-imports sees static imports only, and the optional
 * peers are imported dynamically where first needed (docs/architecture.md#optional-peers), so an
 * owned package's dynamic import outside its owners is refused here.
 */
const ownedDynamicImports = {
  meta: { type: 'problem', schema: [{ type: 'array' }], messages: { owned: '{{message}}' } },
  create(context) {
    const packages = context.options[0] ?? [];
    return {
      ImportExpression(node) {
        const source = node.source.type === 'Literal' ? node.source.value : undefined;
        if (typeof source !== 'string') return;
        const owned = packages.find((p) => source === p.name || source.startsWith(`${p.name}/`));
        if (owned !== undefined) context.report({ node, messageId: 'owned', data: { message: owned.message } });
      },
    };
  },
};

/** Core no-restricted-imports with one allow-list: any specifier `allowed` does not match fails. */
const onlyImports = (allowed, message) => ({ 'no-restricted-imports': ['error', { patterns: [{ regex: `^(?!${allowed})`, message }] }] });
const RELATIVE_OR_BUILTIN = 'node:|\\.{1,2}/';
const LEAF_MESSAGE = 'src/contracts/, src/errors.ts and src/log.ts are leaves: node builtins, zod and pino only, and ipaddr.js in contracts/address-class.ts (docs/architecture.md#rule-1).';

/**
 * Comments stand alone (docs/architecture.md#comments): they say why in their own words and
 * cite the project's docs/, never a tracker number, a document the repository does not hold, or
 * a marker only its author could read. test/unit/standalone-comments.test.ts checks the docs.
 */
export const FOREIGN_REFERENCE = /\b[Ii]ssues? #?\d+|(?:^|[\s(])#\d{1,4}\b|\b[Tt]he seed\b|\bseed \d{3}\b|\[beyond\]|\b(?:SPEC|DESIGN|STYLE)\.md\b|\.\.\/shared\b|\bthe SPEC\b/;
const standaloneComments = {
  meta: { type: 'suggestion', schema: [], messages: { foreign: 'This comment cites "{{found}}", which a reader of this repository cannot follow: say why in the comment itself, or cite docs/.' } },
  create(context) {
    return {
      Program() {
        for (const comment of context.sourceCode.getAllComments()) {
          const found = FOREIGN_REFERENCE.exec(comment.value);
          if (found) context.report({ loc: comment.loc, messageId: 'foreign', data: { found: found[0].trim() } });
        }
      },
    };
  },
};

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
      'import-x/no-restricted-paths': pathRule(null),
    },
  },
  // The owners of a module rule get the same zones without that module's.
  ...MODULE_OWNERS.flatMap((owner) => owner.owners).map((glob) => ({ files: [glob], rules: { 'import-x/no-restricted-paths': pathRule(glob) } })),
  ...packageConfigs,
  {
    // Rule 3: no SQL text outside the store (the drivers themselves are held by packageConfigs).
    files: ['src/**/*.ts'],
    ignores: ['src/store/**'],
    rules: {
      'no-restricted-syntax': ['error',
        { selector: `Literal[value=${SQL_TEXT}]`, message: 'SQL lives only in src/store/ (docs/architecture.md#rule-3): add a Store method instead.' },
        { selector: `TemplateElement[value.raw=${SQL_TEXT}]`, message: 'SQL lives only in src/store/ (docs/architecture.md#rule-3): add a Store method instead.' }],
    },
  },
  { files: ['src/contracts/**/*.ts', 'src/errors.ts', 'src/log.ts'], rules: onlyImports(`${RELATIVE_OR_BUILTIN}|zod$|pino$`, LEAF_MESSAGE) },
  { files: ['src/contracts/address-class.ts'], rules: onlyImports(`${RELATIVE_OR_BUILTIN}|ipaddr\\.js$`, LEAF_MESSAGE) },
  { files: ['src/common/**/*.ts'], rules: onlyImports(RELATIVE_OR_BUILTIN, 'src/common/ imports node builtins only: the sandbox child shares it and has no node_modules (docs/architecture.md#rule-1).') },
  {
    files: ['**/*.ts', '**/*.js', '**/*.mjs', '**/*.cjs'],
    plugins: { fusion: { rules: { 'standalone-comments': standaloneComments, 'owned-dynamic-imports': ownedDynamicImports } } },
    rules: { 'fusion/standalone-comments': 'error' },
  },
  {
    // The child runs with no node_modules: node builtins and relative files only.
    files: ['sandbox/**/*.ts', 'jobs/**/*.ts'],
    rules: onlyImports(RELATIVE_OR_BUILTIN, 'Sandbox code imports no npm package (the child image has none): node: builtins and relative files only (docs/architecture.md#rule-4).'),
  },
  {
    // Tests poke at JSON replies and error objects; `any` there costs nothing and reads better.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // Only the composition root, the CLI and the settings read the environment, install process
    // handlers or exit (docs/architecture.md#rule-5).
    files: ['src/**/*.ts'],
    ignores: ['src/main.ts', 'src/cli/**', 'src/config/**'],
    rules: {
      'no-restricted-properties': ['error',
        { object: 'process', property: 'env', message: 'Only src/main.ts, src/cli/ and src/config/ read process.env (docs/architecture.md#rule-5).' },
        { object: 'process', property: 'exit', message: 'Only src/main.ts, src/cli/ and src/config/ call process.exit (docs/architecture.md#rule-5).' },
        ...['on', 'once', 'addListener', 'prependListener', 'prependOnceListener'].map((property) => ({
          object: 'process', property, message: 'Only src/main.ts, src/cli/ and src/config/ install process signal handlers (docs/architecture.md#rule-5).',
        }))],
    },
  },
);
