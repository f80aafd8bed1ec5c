/**
 * A repository as users keep it (docs/security.md#private-repos): under a 0700 directory (a
 * home), with a FIFO inside (docs/behaviour.md#b9). One builtin task over it completes with a
 * verified answer; nothing was opened up (the parents stay 0700) and no tool blocked on the FIFO
 * (a blocking open would hold that candidate until its 35-minute idle timeout).
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FIXTURE_REPO, describeWithBwrap, startE2EDaemon, type E2EDaemon } from './helpers.js';

describeWithBwrap('fusion workflow e2e: a private repository with a FIFO', () => {
  let d: E2EDaemon;
  const root = mkdtempSync(join(tmpdir(), 'fusion-private-home-'));
  const home = join(root, 'home');
  const repo = join(home, 'project');

  beforeAll(async () => {
    chmodSync(root, 0o700);
    mkdirSync(home, { mode: 0o700 });
    cpSync(FIXTURE_REPO, repo, { recursive: true });
    // FIFOs where the builtin candidates look: beside the sources and at the top.
    execFileSync('mkfifo', [join(repo, 'src', 'refill-notes.ts')]);
    execFileSync('mkfifo', [join(repo, 'NOTES')]);
    d = await startE2EDaemon();
  }, 60_000);

  afterAll(async () => {
    await d?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('completes with a verified answer; the parents are still 0700', async () => {
    const { taskId } = await d.submit(undefined, repo);
    const task = await d.waitTerminal(taskId);
    expect(task.error).toBeNull();
    expect(task.state).toBe('completed');
    const result = (await d.client.call('GET', `/v1/tasks/${taskId}/result`)) as Record<string, any>;
    expect(result.answer).toMatchObject({ present: true, verified: true });
    expect(statSync(root).mode & 0o777).toBe(0o700);
    expect(statSync(home).mode & 0o777).toBe(0o700);
  }, 180_000);
});
