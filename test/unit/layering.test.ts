/**
 * The layering of docs/architecture.md#dependency-rules is enforced by ESLint (eslint.config.js):
 * these tests lint probe files with the project's own config and expect the wrong-way imports
 * to fail, so a weakened rule is noticed here rather than in review.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ESLint } from 'eslint';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const eslint = new ESLint({ cwd: ROOT });

async function ruleIds(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: join(ROOT, filePath) });
  return (result?.messages ?? []).map((m) => m.ruleId ?? m.message);
}

// A probe folder inside the tree (the cycle rule reads the imported files from disk).
const probeDir = join(ROOT, 'src', 'contracts', `layering-probe-${process.pid}`);
afterAll(() => rmSync(probeDir, { recursive: true, force: true }));

describe('ESLint layering rules', () => {
  it('an adapter importing the task layer fails (store → tasks)', async () => {
    const ids = await ruleIds('src/store/probe.ts', "import { TaskService } from '../tasks/task-service.js';\nexport const x = TaskService;\n");
    expect(ids).toContain('import-x/no-restricted-paths');
  }, 60_000);

  it('a sibling adapter import fails (models → launcher), a lower layer passes (models → contracts)', async () => {
    expect(await ruleIds('src/models/probe.ts', "import { SANDBOX_PATHS } from '../launcher/port.js';\nexport const x = SANDBOX_PATHS;\n")).toContain('import-x/no-restricted-paths');
    expect(await ruleIds('src/models/probe.ts', "import { SCHEMA } from '../contracts/constants.js';\nexport const x = SCHEMA;\n")).toEqual([]);
  }, 60_000);

  it('common sits below errors.ts: errors.ts reads the code registry from common, common never imports errors.ts', async () => {
    expect(await ruleIds('src/common/probe.ts', "import { FusionError } from '../errors.js';\nexport const x = FusionError;\n")).toContain('import-x/no-restricted-paths');
    expect(await ruleIds('src/errors.ts', "import { ERROR_CODES } from './common/error-codes.js';\nexport const x = ERROR_CODES;\n")).toEqual([]);
  }, 60_000);

  it('contracts import no higher layer, even as a type', async () => {
    const ids = await ruleIds('src/contracts/probe.ts', "import type { Store } from '../store/port.js';\nexport type X = Store;\n");
    expect(ids).toContain('import-x/no-restricted-paths');
  }, 60_000);

  it('sandbox code imports no daemon code and no npm package', async () => {
    const ids = await ruleIds(
      'sandbox/probe.ts',
      "import { z } from 'zod';\nimport { FusionError } from '../src/errors.js';\nimport { SCHEMA } from '../src/contracts/constants.js';\nexport const x = [z, FusionError, SCHEMA];\n",
    );
    expect(ids.filter((id) => id === 'import-x/no-restricted-paths')).toHaveLength(1);
    expect(ids).toContain('no-restricted-imports');
  }, 60_000);

  it('an import cycle fails', async () => {
    mkdirSync(probeDir, { recursive: true });
    writeFileSync(join(probeDir, 'a.ts'), "import { b } from './b.js';\nexport const a = (): number => b + 1;\n");
    writeFileSync(join(probeDir, 'b.ts'), "import { a } from './a.js';\nexport const b = 1;\nexport const c = a;\n");
    const results = await eslint.lintFiles([join(probeDir, 'a.ts')]);
    expect(results[0]?.messages.map((m) => m.ruleId)).toContain('import-x/no-cycle');
  }, 60_000);
});
