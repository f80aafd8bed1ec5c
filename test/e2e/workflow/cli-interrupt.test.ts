/**
 * Ctrl-C on an embedded `fusion investigate --wait` (honest clients, docs/behaviour.md#f): the CLI asks its
 * embedded daemon to stop gracefully, says what happens to the task and how to resume or
 * cancel it, exits 130, and the task is left non-terminal (resumable), not failed or cancelled.
 */
import { startScript } from '../../helpers/cli.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { openSqliteStore } from '../../../src/store/sqlite-store.js';
import { isTerminal } from '../../../src/contracts/task-state.js';
import { DIST, REFILL_ARGS, copyFixtureRepo, describeWithBwrap } from './helpers.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

describeWithBwrap('Ctrl-C on an embedded --wait', () => {
  it('stops the embedded daemon gracefully, prints how to resume or cancel, exits 130 and leaves the task resumable', async () => {
    const home = mkdtempSync(join(tmpdir(), 'fusion-interrupt-'));
    const fixture = copyFixtureRepo();
    cleanups.push(() => rmSync(home, { recursive: true, force: true }), () => rmSync(fixture.root, { recursive: true, force: true }));
    const args = [
      join(DIST, 'src', 'cli', 'main.js'), 'investigate', '--objective', REFILL_ARGS.objective, '--deliverable', REFILL_ARGS.deliverable,
      ...REFILL_ARGS.background.flatMap((b) => ['--background', b]), '--repo', fixture.repo, '--data', home, '--sandbox', 'bwrap', '--wait',
    ];
    const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', FUSION_HOME: home, FUSION_LOG_LEVEL: 'silent' };
    const cli = startScript(args[0]!, args.slice(1), { env, cleanEnv: true });
    // Interrupt as soon as the receipt is printed: the task has just been accepted.
    const taskId = (await cli.waitForText('stderr', /(investigate-[0-9a-f]{32})/, 'the receipt', 60_000))[1]!;
    cli.proc.kill('SIGINT');
    const { code } = await cli.closed;
    const stderr = cli.stderr();
    expect(code, stderr).toBe(130);
    expect(stderr).toContain('interrupted: stopping the embedded daemon gracefully');
    expect(stderr).toContain(`task ${taskId} was left unfinished in ${home}`);
    expect(stderr).toContain(`resume:  fusion daemon --data ${home}`);
    expect(stderr).toContain(`cancel:  start that daemon, then: fusion cancel ${taskId}`);

    const store = await openSqliteStore({ file: join(home, 'fusion.db'), log: silentLogger() });
    try {
      const task = await store.getTask(taskId);
      expect(task).not.toBeNull();
      // Neither failed nor cancelled: a daemon started on this home resumes it.
      expect(isTerminal(task!.state), `state ${task!.state}`).toBe(false);
    } finally {
      await store.close();
    }
  }, 120_000);
});
