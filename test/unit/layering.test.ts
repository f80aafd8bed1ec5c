/**
 * Every rule of docs/architecture.md#dependency-rules is enforced by ESLint (eslint.config.js):
 * these tests lint probe files with the project's own config, one probe breaking each rule, and
 * expect each to fail (and the allowed neighbour of each to pass), so a weakened rule is noticed
 * here rather than in review. One probe goes through the `eslint` command itself, as `make lint`
 * runs it.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ESLint } from 'eslint';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const eslint = new ESLint({ cwd: ROOT });
const LINT_TIMEOUT_MS = 60_000;

async function ruleIds(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: join(ROOT, filePath) });
  return (result?.messages ?? []).map((m) => m.ruleId ?? m.message);
}

// A probe folder inside the tree (the cycle rule reads the imported files from disk).
const probeDir = join(ROOT, 'src', 'contracts', `layering-probe-${process.pid}`);
const probeFile = join(ROOT, 'src', 'store', `layering-probe-${process.pid}.ts`);
afterAll(() => {
  rmSync(probeDir, { recursive: true, force: true });
  rmSync(probeFile, { force: true });
});

interface Probe {
  /** What the probe breaks, as docs/architecture.md states it. */
  rule: string;
  file: string;
  code: string;
  /** The rule id that must report it; undefined for a probe that must pass. */
  fails?: string;
}

const PROBES: Probe[] = [
  // The layer order (docs/architecture.md#layers).
  { rule: 'layers: an adapter imports the task layer (store → tasks)', file: 'src/store/probe.ts', code: "import { TaskService } from '../tasks/task-service.js';\nexport const x = TaskService;\n", fails: 'import-x/no-restricted-paths' },
  { rule: 'layers: a sibling adapter (models → launcher)', file: 'src/models/probe.ts', code: "import { SANDBOX_PATHS } from '../launcher/port.js';\nexport const x = SANDBOX_PATHS;\n", fails: 'import-x/no-restricted-paths' },
  { rule: 'layers: a lower layer is fine (models → contracts)', file: 'src/models/probe.ts', code: "import { SCHEMA } from '../contracts/constants.js';\nexport const x = SCHEMA;\n" },
  { rule: 'layers: contracts import no higher layer, even as a type', file: 'src/contracts/probe.ts', code: "import type { Store } from '../store/port.js';\nexport type X = Store;\n", fails: 'import-x/no-restricted-paths' },
  { rule: 'layers: src/queue is an adapter row folder (queue → tasks)', file: 'src/queue/probe.ts', code: "import { TaskService } from '../tasks/task-service.js';\nexport const x = TaskService;\n", fails: 'import-x/no-restricted-paths' },
  { rule: 'layers: a sibling of src/queue (queue → store)', file: 'src/queue/probe.ts', code: "import { openSqliteStore } from '../store/sqlite-store.js';\nexport const x = openSqliteStore;\n", fails: 'import-x/no-restricted-paths' },
  { rule: 'layers: a queue adapter imports src/queue', file: 'src/research/probe.ts', code: "import { clusterQueuePrefix } from '../queue/bullmq-shared.js';\nexport const x = clusterQueuePrefix;\n" },
  // Rule 1: leaves.
  { rule: 'rule 1: contracts import an npm package other than zod, pino', file: 'src/contracts/probe.ts', code: "import { request } from 'undici';\nexport const x = request;\n", fails: 'no-restricted-imports' },
  { rule: 'rule 1: contracts import zod', file: 'src/contracts/probe.ts', code: "import { z } from 'zod';\nexport const x = z.string();\n" },
  { rule: 'rule 1: ipaddr.js outside the one address classifier', file: 'src/contracts/probe.ts', code: "import ipaddr from 'ipaddr.js';\nexport const x = ipaddr;\n", fails: 'no-restricted-imports' },
  { rule: 'rule 1: the address classifier imports ipaddr.js', file: 'src/contracts/address-class.ts', code: "import ipaddr from 'ipaddr.js';\nexport const x = ipaddr;\n" },
  { rule: 'rule 1: src/common imports an npm package', file: 'src/common/probe.ts', code: "import { z } from 'zod';\nexport const x = z;\n", fails: 'no-restricted-imports' },
  // Rule 2: ports, not adapters, in workflow/ and tasks/.
  { rule: 'rule 2: the workflow imports a concrete launcher', file: 'src/workflow/probe.ts', code: "import { createBwrapLauncher } from '../launcher/bwrap.js';\nexport const x = createBwrapLauncher;\n", fails: 'import-x/no-restricted-paths' },
  { rule: 'rule 2: the task layer imports the SQLite adapter, even as a type', file: 'src/tasks/probe.ts', code: "import type { SqliteStore } from '../store/sqlite-store.js';\nexport type X = SqliteStore;\n", fails: 'import-x/no-restricted-paths' },
  { rule: 'rule 2: the task layer imports the Store port', file: 'src/tasks/probe.ts', code: "import type { Store } from '../store/port.js';\nexport type X = Store;\n" },
  // Rule 3: each driver in its adapter.
  { rule: 'rule 3: SQL driver outside src/store (sqlite3)', file: 'src/api/probe.ts', code: "import sqlite3 from 'sqlite3';\nexport const x = sqlite3;\n", fails: '@typescript-eslint/no-restricted-imports' },
  { rule: 'rule 3: SQL driver outside src/store (pg subpath)', file: 'src/tasks/probe.ts', code: "import pg from 'pg/lib/index.js';\nexport const x = pg;\n", fails: '@typescript-eslint/no-restricted-imports' },
  { rule: 'rule 3: sqlite3 in src/store', file: 'src/store/probe.ts', code: "import sqlite3 from 'sqlite3';\nexport const x = sqlite3;\n" },
  { rule: 'rule 3: SQL text outside src/store', file: 'src/tasks/probe.ts', code: "export const q = 'SELECT id FROM tasks WHERE state = ?';\n", fails: 'no-restricted-syntax' },
  { rule: 'rule 3: SQL text in a template outside src/store', file: 'src/research/probe.ts', code: 'export const q = (t: string): string => `DELETE FROM ${t}`;\n', fails: 'no-restricted-syntax' },
  { rule: 'rule 3: SQL text in src/store', file: 'src/store/probe.ts', code: "export const q = 'SELECT id FROM tasks WHERE state = ?';\n" },
  { rule: 'rule 3: dockerode outside src/launcher/docker.ts', file: 'src/launcher/probe.ts', code: "import Docker from 'dockerode';\nexport const x = Docker;\n", fails: '@typescript-eslint/no-restricted-imports' },
  { rule: 'rule 3: a value import of dockerode in docker-config.ts (types only there)', file: 'src/launcher/docker-config.ts', code: "import Docker from 'dockerode';\nexport const x = Docker;\n", fails: '@typescript-eslint/no-restricted-imports' },
  { rule: 'rule 3: dockerode types in docker-config.ts', file: 'src/launcher/docker-config.ts', code: "import type Docker from 'dockerode';\nexport type X = Docker;\n" },
  { rule: 'rule 3: dockerode in docker.ts', file: 'src/launcher/docker.ts', code: "import Docker from 'dockerode';\nexport const x = Docker;\n" },
  { rule: 'rule 3: a dynamic import of pg outside src/store', file: 'src/api/probe.ts', code: "export const load = (): Promise<unknown> => import('pg');\n", fails: 'fusion/owned-dynamic-imports' },
  { rule: 'rule 3: a dynamic import of dockerode in docker-config.ts (types only there)', file: 'src/launcher/docker-config.ts', code: "export const load = (): Promise<unknown> => import('dockerode');\n", fails: 'fusion/owned-dynamic-imports' },
  { rule: 'rule 3: a dynamic import of sqlite3 in src/store', file: 'src/store/probe.ts', code: "export const load = (): Promise<unknown> => import('sqlite3');\n" },
  { rule: 'rule 3: undici outside egress/ and models/', file: 'src/research/probe.ts', code: "import { request } from 'undici';\nexport const x = request;\n", fails: '@typescript-eslint/no-restricted-imports' },
  { rule: 'rule 3: undici in src/models', file: 'src/models/probe.ts', code: "import { request } from 'undici';\nexport const x = request;\n" },
  { rule: 'rule 3: bullmq outside the queue adapters', file: 'src/research/research-service.ts', code: "import { Queue } from 'bullmq';\nexport const x = Queue;\n", fails: '@typescript-eslint/no-restricted-imports' },
  { rule: 'rule 3: bullmq in a queue adapter', file: 'src/tasks/queue-dispatch.ts', code: "import { Queue } from 'bullmq';\nexport const x = Queue;\n" },
  { rule: 'rule 3: ipaddr.js outside the address classifier', file: 'src/api/probe.ts', code: "import ipaddr from 'ipaddr.js';\nexport const x = ipaddr;\n", fails: '@typescript-eslint/no-restricted-imports' },
  { rule: 'rule 3: the metrics registry outside src/instrument.ts and the /metrics route (workflow)', file: 'src/workflow/probe.ts', code: "import { replayMismatches } from '../metrics/registry.js';\nexport const x = replayMismatches;\n", fails: 'import-x/no-restricted-paths' },
  { rule: 'rule 3: the metrics registry in another API module than the /metrics route', file: 'src/api/routes.ts', code: "import { registry } from '../metrics/registry.js';\nexport const x = registry;\n", fails: 'import-x/no-restricted-paths' },
  { rule: 'rule 3: the metrics registry in the composition root, even as a type', file: 'src/main.ts', code: "import type { registry } from './metrics/registry.js';\nexport type X = typeof registry;\n", fails: 'import-x/no-restricted-paths' },
  { rule: 'rule 3: the metrics registry in src/instrument.ts', file: 'src/instrument.ts', code: "import { replayMismatches } from './metrics/registry.js';\nexport const x = replayMismatches;\n" },
  { rule: 'rule 3: the metrics registry in the /metrics route', file: 'src/api/metrics.ts', code: "import { registry } from '../metrics/registry.js';\nexport const x = registry;\n" },
  // Rule 4: the sandbox child.
  { rule: 'rule 4: sandbox code imports daemon code', file: 'sandbox/probe.ts', code: "import { FusionError } from '../src/errors.js';\nexport const x = FusionError;\n", fails: 'import-x/no-restricted-paths' },
  { rule: 'rule 4: sandbox code imports an npm package', file: 'sandbox/probe.ts', code: "import { z } from 'zod';\nexport const x = z;\n", fails: 'no-restricted-imports' },
  { rule: 'rule 4: sandbox code imports contracts', file: 'sandbox/probe.ts', code: "import { SCHEMA } from '../src/contracts/constants.js';\nexport const x = SCHEMA;\n" },
  // Rule 5: the environment, process handlers and exit only at the edges.
  { rule: 'rule 5: process.env outside main/cli/config', file: 'src/tasks/probe.ts', code: 'export const x = process.env.HOME;\n', fails: 'no-restricted-properties' },
  { rule: 'rule 5: process.exit outside main/cli/config', file: 'src/api/probe.ts', code: 'export const x = (): never => process.exit(1);\n', fails: 'no-restricted-properties' },
  { rule: 'rule 5: a signal handler outside main/cli/config', file: 'src/workflow/probe.ts', code: "process.once('SIGTERM', () => undefined);\nexport const x = 1;\n", fails: 'no-restricted-properties' },
  { rule: 'rule 5: a signal handler in the CLI', file: 'src/cli/probe.ts', code: "process.once('SIGTERM', () => undefined);\nexport const x = 1;\n" },
  // Comments stand alone (docs/architecture.md#comments).
  { rule: 'comments: a tracker number', file: 'src/tasks/probe.ts', code: '// Refused early (issue 16).\nexport const x = 1;\n', fails: 'fusion/standalone-comments' },
  { rule: 'comments: a "#N" reference in a test', file: 'test/unit/probe.test.ts', code: '/** Fixed in #21. */\nexport const x = 1;\n', fails: 'fusion/standalone-comments' },
  { rule: 'comments: "the seed" in a bench', file: 'bench/probe.bench.mjs', code: "// The seed's limits.\nexport const x = 1;\n", fails: 'fusion/standalone-comments' },
  { rule: 'comments: a private marker', file: 'src/egress/probe.ts', code: '/** Also denied [beyond]. */\nexport const x = 1;\n', fails: 'fusion/standalone-comments' },
  { rule: 'comments: a document the repository does not hold', file: 'sandbox/probe.ts', code: `// As ${'SPEC'}.md says.\nexport const x = 1;\n`, fails: 'fusion/standalone-comments' },
  { rule: 'comments: a docs/ anchor', file: 'src/tasks/probe.ts', code: '// Refused early (docs/behaviour.md#b2); "#1" in a string is data.\nexport const x = \'#1 issue 16\';\n' },
];

describe('ESLint enforces docs/architecture.md', () => {
  for (const probe of PROBES) {
    it(`${probe.fails ? 'fails' : 'passes'}: ${probe.rule}`, async () => {
      const ids = await ruleIds(probe.file, probe.code);
      if (probe.fails) expect(ids).toContain(probe.fails);
      else expect(ids).toEqual([]);
    }, LINT_TIMEOUT_MS);
  }

  it('common sits below errors.ts: errors.ts reads the code registry from common, common never imports errors.ts', async () => {
    expect(await ruleIds('src/common/probe.ts', "import { FusionError } from '../errors.js';\nexport const x = FusionError;\n")).toContain('import-x/no-restricted-paths');
    expect(await ruleIds('src/errors.ts', "import { ERROR_CODES } from './common/error-codes.js';\nexport const x = ERROR_CODES;\n")).toEqual([]);
  }, 60_000);

  it('contracts import no higher layer, even as a type', async () => {
    const ids = await ruleIds('src/contracts/probe.ts', "import type { Store } from '../store/port.js';\nexport type X = Store;\n");
    expect(ids).toContain('import-x/no-restricted-paths');
  }, 60_000);

  it('the rule table of docs/architecture.md has a failing probe for each rule', () => {
    const broken = new Set(PROBES.filter((p) => p.fails).map((p) => p.rule.split(':')[0]));
    expect([...broken].sort()).toEqual(['comments', 'layers', 'rule 1', 'rule 2', 'rule 3', 'rule 4', 'rule 5']);
  });

  it('an import cycle fails', async () => {
    mkdirSync(probeDir, { recursive: true });
    writeFileSync(join(probeDir, 'a.ts'), "import { b } from './b.js';\nexport const a = (): number => b + 1;\n");
    writeFileSync(join(probeDir, 'b.ts'), "import { a } from './a.js';\nexport const b = 1;\nexport const c = a;\n");
    const results = await eslint.lintFiles([join(probeDir, 'a.ts')]);
    expect(results[0]?.messages.map((m) => m.ruleId)).toContain('import-x/no-cycle');
  }, LINT_TIMEOUT_MS);

  it('the eslint command (as make lint runs it) exits non-zero on a probe file', () => {
    writeFileSync(probeFile, "import { TaskService } from '../tasks/task-service.js';\nexport const x = TaskService;\n");
    const run = spawnSync(join(ROOT, 'node_modules', '.bin', 'eslint'), [probeFile], { cwd: ROOT, encoding: 'utf8' });
    expect(run.status).toBe(1);
    expect(run.stdout).toContain('import-x/no-restricted-paths');
  }, 120_000);
});
