/**
 * The Docker backend end to end: `fusion investigate --sandbox docker … --wait` completes end to end with
 * the builtin engine, through the real CLI (embedded daemon) and real containers.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { createTestDockerLauncher, describeBackend } from '../containment/helpers.js';

const ROOT = join(__dirname, '..', '..', '..');
const status = await createTestDockerLauncher(silentLogger()).check();

describeBackend('fusion investigate --sandbox docker', status, () => {
  it('completes with a verified answer citing the right file', () => {
    const home = mkdtempSync(join(tmpdir(), 'fusion-docker-run-'));
    const r = spawnSync(
      process.execPath,
      [
        join(ROOT, 'dist', 'src', 'cli', 'main.js'),
        'investigate',
        '--sandbox', 'docker',
        '--repo', join(ROOT, 'test', 'fixtures', 'builtin-repo'),
        '--objective', 'Find where numeric literals are tokenized',
        '--background', 'A small calculator with a lexer and a parser',
        '--deliverable', 'The file and function that tokenize numbers',
        '--wait',
      ],
      { encoding: 'utf8', env: { ...process.env, FUSION_HOME: home }, timeout: 120_000 },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/Answer: \d+ bytes, sha256:[0-9a-f]{64} \(verified\)\. Engine: builtin\./);
    expect(r.stderr).toContain('merging → completed');
    expect(r.stdout).toContain('src/lexer/tokenizer.js');
  });
});
