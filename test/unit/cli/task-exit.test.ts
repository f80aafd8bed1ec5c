/**
 * The exit code of a task that ended, as `fusion wait`, `fusion result` and `--wait` give it
 * (src/cli/exit-codes.ts): a completed task that read nothing (docs/behaviour.md#nothing-read)
 * is 66, not 0, and `--json` says `nothingRead: true`. Over the real socket routes, with the task
 * service on fakes of its ports (no daemon).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { silentLogger } from '../../../src/log.js';
import { createApiHandler } from '../../../src/api/routes.js';
import { runCli } from '../../../src/cli/main.js';
import { EXIT, EXIT_CODES, endedTaskExit } from '../../../src/cli/exit-codes.js';
import { printResult } from '../../../src/cli/commands.js';
import { completingRunner, INVESTIGATE_ARGS, makeDirs, makeService, until, type Dirs } from '../fakes/task-fixtures.js';

let dirs: Dirs;
const servers: Server[] = [];

beforeAll(() => {
  dirs = makeDirs();
});
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  dirs.remove();
});

function io(): { out: { stdout: string; stderr: string }; io: { stdout: (t: string) => void; stderr: (t: string) => void; readStdin: () => string } } {
  const out = { stdout: '', stderr: '' };
  return { out, io: { stdout: (t) => void (out.stdout += t), stderr: (t) => void (out.stderr += t), readStdin: () => '' } };
}

/** A completed investigate task whose result metadata carries `metadata`, behind a socket; its id and socket. */
async function completedTask(metadata: Record<string, unknown>): Promise<{ socket: string; taskId: string }> {
  const h = makeService(dirs, completingRunner(dirs, 'The answer.\n', metadata));
  const socket = join(dirs.base, `cli-${servers.length}.sock`);
  const server = createServer(createApiHandler({ tasks: h.service, log: silentLogger(), version: '9.9.9', startedAt: '2026-01-01T00:00:00.000Z', sandbox: async () => ({ backend: 'fake' }) }, 'socket'));
  servers.push(server);
  await new Promise<void>((r) => server.listen(socket, r));
  const { taskId } = await h.service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
  await until(async () => (await h.service.get(taskId)).state === 'completed');
  return { socket, taskId };
}

const UNREADABLE_REPO = { repository: { entries: 3, files: 0, skipped: { unreadable: 4, secret: 0 } } };

describe('the exit code of an ended task', () => {
  it('66 is its own code: not 0/1, not a code shells or timeout(1) give, and in the table', () => {
    expect(EXIT.nothingRead).toBe(66);
    expect([0, 1, 2, 124, 125, 126, 127]).not.toContain(EXIT.nothingRead);
    expect(EXIT.nothingRead).toBeLessThan(128);
    const codes = EXIT_CODES.map((e) => e.code);
    expect(new Set(codes).size).toBe(codes.length);
    expect(codes).toContain(EXIT.nothingRead);
  });

  it('completed is 0, completed having read nothing 66, failed or cancelled 1', () => {
    expect(endedTaskExit('completed', false)).toBe(EXIT.ok);
    expect(endedTaskExit('completed', undefined)).toBe(EXIT.ok);
    expect(endedTaskExit('completed', true)).toBe(EXIT.nothingRead);
    expect(endedTaskExit('failed', true)).toBe(EXIT.failed);
    expect(endedTaskExit('cancelled', undefined)).toBe(EXIT.failed);
  });

  it('fusion result: an answer written from nothing exits 66 with the reason on stderr; --json carries nothingRead', async () => {
    const { socket, taskId } = await completedTask(UNREADABLE_REPO);
    const text = io();
    expect(await runCli(['result', taskId, '--socket', socket], {}, text.io)).toBe(66);
    expect(text.out.stderr).toContain("Nothing was read: none of the repository's files could be read (4 left out)");
    expect(text.out.stdout).toBe('The answer.\n');
    const json = io();
    expect(await runCli(['result', taskId, '--socket', socket, '--json'], {}, json.io)).toBe(66);
    expect(JSON.parse(json.out.stdout)).toMatchObject({ status: 'completed', nothingRead: true, answer: { present: true, verified: true } });
  });

  it('fusion wait: 66 for the same task, saying so on stderr; --json carries nothingRead', async () => {
    const { socket, taskId } = await completedTask(UNREADABLE_REPO);
    const text = io();
    expect(await runCli(['wait', taskId, '--socket', socket, '--timeout', '5'], {}, text.io)).toBe(66);
    expect(text.out.stderr).toContain(`${taskId} completed, but read nothing: none of its repository's files could be read`);
    const json = io();
    expect(await runCli(['wait', taskId, '--socket', socket, '--json'], {}, json.io)).toBe(66);
    expect(JSON.parse(json.out.stdout)).toMatchObject({ terminal: true, nothingRead: true, task: { status: 'completed' } });
  });

  it('a task that read its repository exits 0 from both, with nothingRead false', async () => {
    const { socket, taskId } = await completedTask({ repository: { entries: 3, files: 2, skipped: { unreadable: 1, secret: 0 } } });
    const waited = io();
    expect(await runCli(['wait', taskId, '--socket', socket, '--json'], {}, waited.io)).toBe(0);
    expect(JSON.parse(waited.out.stdout)).toMatchObject({ nothingRead: false });
    const read = io();
    expect(await runCli(['result', taskId, '--socket', socket, '--json'], {}, read.io)).toBe(0);
    expect(JSON.parse(read.out.stdout)).toMatchObject({ nothingRead: false });
  });

  it('printResult (what --wait ends with) maps a reply from a daemon without the field to 0, and still running to 75', async () => {
    const quiet = io();
    expect(await printResult({ taskId: 't', status: 'completed', answer: { present: true, header: 'Answer.', text: 'x' } }, quiet.io, false)).toBe(EXIT.ok);
    expect(await printResult({ taskId: 't', status: 'completed', nothingRead: true, answer: { present: true, header: 'Answer.', text: 'x' } }, quiet.io, false)).toBe(EXIT.nothingRead);
    expect(await printResult({ taskId: 't', status: 'running', state: 'running', answer: { present: false, reason: 'still_running' } }, quiet.io, false)).toBe(EXIT.stillRunning);
  });
});
