/**
 * `make run`, the first command a new user runs: it provides the child image as `make test`
 * does (image-ready, its output on stderr), so the embedded daemon's `auto` never picks an image of other child code,
 * and its stdout is the answer alone, without make's echo of the command (a recipe starting
 * with `@`). Read from the Makefile's own rule text (running it would take minutes).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { ROOT } from '../../helpers/gates.js';

function rule(makefile: string, target: string): { prerequisites: string[]; recipe: string[] } {
  const lines = makefile.split('\n');
  const at = lines.findIndex((l) => l.startsWith(`${target}:`));
  if (at < 0) throw new Error(`no ${target} rule`);
  const recipe: string[] = [];
  for (const l of lines.slice(at + 1)) {
    if (!l.startsWith('\t')) break;
    recipe.push(l.slice(1));
  }
  return { prerequisites: (lines[at] as string).slice(target.length + 1).trim().split(/\s+/u), recipe };
}

it('make run sets up the child image and prints only the answer on stdout', () => {
  const run = rule(readFileSync(join(ROOT, 'Makefile'), 'utf8'), 'run');
  // The set-up runs first with its output on stderr (a fresh clone's npm, node-gyp and tsc
  // would otherwise come before the answer on stdout).
  expect(run.recipe[0]).toBe('@$(MAKE) --no-print-directory setup image-ready >&2');
  expect(run.recipe[1]).toMatch(/^@node dist\/src\/cli\/main\.js investigate /u);
  const docker = readFileSync(join(ROOT, 'mk', 'docker.mk'), 'utf8');
  expect(rule(docker, 'image-ready').recipe.join('\n')).toContain('scripts/build-child-image.sh');
});
