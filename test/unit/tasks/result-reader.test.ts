/**
 * bg_result (docs/behaviour.md#f3) over the in-memory store: never blocks, verifies digests before
 * delivering, never truncates, usage on the first retrieval only.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { INLINE_LIMIT_BYTES } from '../../../src/contracts/constants.js';
import { readAnswerBytes, readBgResult } from '../../../src/tasks/result-reader.js';
import { completingRunner, INVESTIGATE_ARGS, makeDirs, makeService, until, type Dirs, type Harness } from '../fakes/task-fixtures.js';

let dirs: Dirs;
beforeEach(() => {
  dirs = makeDirs();
});
afterEach(() => dirs.remove());

async function completed(answer?: string): Promise<Harness & { taskId: string }> {
  const h = makeService(dirs, completingRunner(dirs, answer));
  const { taskId } = await h.service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
  await until(async () => (await h.service.get(taskId)).state === 'completed');
  return { ...h, taskId };
}

async function completedWith(metadata: Record<string, unknown>): Promise<Harness & { taskId: string }> {
  const h = makeService(dirs, completingRunner(dirs, 'The answer.\n', metadata));
  const { taskId } = await h.service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
  await until(async () => (await h.service.get(taskId)).state === 'completed');
  return { ...h, taskId };
}

describe('readBgResult', () => {
  it('delivers a verified answer inline, with the engine and a header naming the digest', async () => {
    const { store, taskId } = await completed('The answer.\n');
    const result = await readBgResult(store, (await store.getTask(taskId))!);
    expect(result).toMatchObject({ status: 'completed', delivery: 'inline', engine: 'fake', answer: { present: true, verified: true, bytes: 12, text: 'The answer.\n' } });
    expect(result.answer.present && result.answer.header).toMatch(/^Answer: 12 bytes, sha256:[0-9a-f]{64} \(verified\)\.$/);
    expect(result.signed).toBeUndefined();
  });

  it('answers still_running for a running task without blocking', async () => {
    const { store, taskId } = await completed();
    const task = { ...(await store.getTask(taskId))!, state: 'evaluating' as const };
    expect(await readBgResult(store, task)).toMatchObject({ state: 'running', stage: 'evaluating', status: 'running', answer: { present: false, reason: 'still_running' } });
  });

  it('refuses an answer file changed after the commit (artifact_error)', async () => {
    const { store, taskId } = await completed('The answer.\n');
    writeFileSync((await store.getResult(taskId))!.answerPath, 'The answeR.\n');
    await expect(readBgResult(store, (await store.getTask(taskId))!)).rejects.toMatchObject({ code: 'artifact_error' });
  });

  it('refuses inline delivery above the inline limit and offers the artifact path instead; auto picks artifact', async () => {
    const big = 'x'.repeat(INLINE_LIMIT_BYTES + 1);
    const { store, taskId } = await completed(big);
    const task = (await store.getTask(taskId))!;
    await expect(readBgResult(store, task, 'inline')).rejects.toMatchObject({ code: 'inline_limit_exceeded' });
    const auto = await readBgResult(store, task, 'auto');
    expect(auto.delivery).toBe('artifact');
    expect(auto.answer).toMatchObject({ present: true, bytes: big.length, path: (await store.getResult(taskId))!.answerPath });
  });

  it('attaches usage to the first retrieval only, and runs the seal check when given', async () => {
    const { store, taskId } = await completed();
    await store.saveUsage(taskId, JSON.stringify({ entries: [], totals: { inputTokens: 0, outputTokens: 0, requests: 3 } }));
    let sealed = 0;
    const seal = async (): Promise<{ signed: true }> => {
      sealed++;
      return { signed: true };
    };
    const first = await readBgResult(store, (await store.getTask(taskId))!, 'auto', { sealCheck: seal });
    const second = await readBgResult(store, (await store.getTask(taskId))!, 'auto', { sealCheck: seal });
    expect(first.usage).toEqual({ entries: [], totals: { inputTokens: 0, outputTokens: 0, requests: 3 } });
    expect(second.usage).toBeUndefined();
    expect(first.signed).toBe(true);
    expect(sealed).toBe(2);
  });

  it('says when an answer was sealed unsigned before the signing key, as the seal check reports', async () => {
    const { store, taskId } = await completed();
    const read = await readBgResult(store, (await store.getTask(taskId))!, 'auto', { sealCheck: async () => ({ signed: false, sealedBeforeKey: '2026-01-02T03:04:05.000Z' }) });
    expect(read).toMatchObject({ signed: false, sealedBeforeKey: '2026-01-02T03:04:05.000Z' });
    expect(read.answer.present).toBe(true);
  });

  it('a completed task that read nothing says so: nothingRead, sourcesNotRead and the header sentence (docs/behaviour.md#nothing-read)', async () => {
    const sources = [{ url: 'https://a.example.test/doc', purpose: 'docs' }, { url: 'https://b.example.test/doc', purpose: 'more docs' }];
    const notRead = sources.map((s) => ({ url: s.url, reason: 'dns_error: no such host' }));
    const h = makeService(dirs, completingRunner(dirs, 'Nothing confirmed.\n', { sources_not_read: notRead }));
    const { taskId } = await h.service.submit({ workflow: 'research', arguments: { ...INVESTIGATE_ARGS, sources }, repo: dirs.repo });
    await until(async () => (await h.service.get(taskId)).state === 'completed');
    const task = (await h.store.getTask(taskId))!;
    const result = await readBgResult(h.store, task);
    expect(result).toMatchObject({ status: 'completed', nothingRead: true, sourcesNotRead: notRead, answer: { present: true, verified: true } });
    expect(result.answer.present && result.answer.header).toMatch(/\(verified\)\. Nothing was read: none of its 2 declared sources could be fetched, so the answer is written without them \(see "Sources not read"\)\.$/u);
    expect(await h.service.nothingRead(task)).toEqual({ what: 'sources', count: 2 });

    // One source read: a real success, with the other still named.
    const one = makeService(dirs, completingRunner(dirs, 'Read one.\n', { sources_not_read: notRead.slice(1) }));
    const second = await one.service.submit({ workflow: 'research', arguments: { ...INVESTIGATE_ARGS, sources }, repo: dirs.repo });
    await until(async () => (await one.service.get(second.taskId)).state === 'completed');
    const partial = await readBgResult(one.store, (await one.store.getTask(second.taskId))!);
    expect(partial).toMatchObject({ nothingRead: false, sourcesNotRead: notRead.slice(1) });
    expect(partial.answer.present && partial.answer.header).toMatch(/\(verified\)\.$/u);
  });

  it('a repository none of whose files the caller could read is nothing read; a result that does not check is not judged', async () => {
    const { store, service, taskId } = await completedWith({ repository: { entries: 2, files: 0, skipped: { unreadable: 3, secret: 1 } } });
    const task = (await store.getTask(taskId))!;
    expect(await readBgResult(store, task)).toMatchObject({ nothingRead: true, repository: { files: 0 } });
    expect(await service.nothingRead(task)).toEqual({ what: 'files', count: 4 });
    const row = (await store.getResult(taskId))!;
    const tampered = { ...row, metadata: row.metadata.replace('"files":0', '"files":1') };
    const checked = { ...store, getResult: async () => tampered } as unknown as typeof store;
    const { completedNothingRead } = await import('../../../src/tasks/result-reader.js');
    expect(await completedNothingRead(checked, task)).toBeNull();
    const plain = await completed();
    expect(await readBgResult(plain.store, (await plain.store.getTask(plain.taskId))!)).toMatchObject({ nothingRead: false });
  });

  it('a failed task has no answer and carries its error', async () => {
    const { store, taskId } = await completed();
    const task = { ...(await store.getTask(taskId))!, state: 'failed' as const, error: { code: 'launch_failed', message: 'x', state: 'candidates_running' as const } };
    expect(await readBgResult(store, task)).toMatchObject({ status: 'failed', answer: { present: false, reason: 'run_did_not_commit' }, error: { code: 'launch_failed' } });
  });
});

describe('readAnswerBytes', () => {
  it('returns the verified bytes of any size; refuses a running task (retryable) and a task that committed nothing', async () => {
    const big = 'y'.repeat(INLINE_LIMIT_BYTES * 2);
    const { store, taskId } = await completed(big);
    const task = (await store.getTask(taskId))!;
    const { answer, sha256 } = await readAnswerBytes(store, task);
    expect({ text: answer.toString('utf8') === big, sha256 }).toEqual({ text: true, sha256: (await store.getResult(taskId))!.answerSha256 });
    await expect(readAnswerBytes(store, { ...task, state: 'merging' })).rejects.toMatchObject({ code: 'task_not_terminal' });
    await expect(readAnswerBytes(store, { ...task, state: 'failed' })).rejects.toMatchObject({ code: 'not_found', message: `task ${taskId} ended failed and committed no answer` });
    writeFileSync((await store.getResult(taskId))!.answerPath, 'changed');
    await expect(readAnswerBytes(store, task)).rejects.toMatchObject({ code: 'artifact_error' });
  });
});

describe('a data directory restored under another path', () => {
  it('reads the answer from this daemon\'s task folder first, the recorded path only without it, and always checks the digest', async () => {
    const { store, taskId } = await completed('The answer.\n');
    const task = (await store.getTask(taskId))!;
    const recorded = (await store.getResult(taskId))!.answerPath;
    const here = join(dirs.base, 'restored-answer.md');
    renameSync(recorded, here);
    await expect(readBgResult(store, task)).rejects.toMatchObject({ code: 'artifact_error' });
    const result = await readBgResult(store, task, 'artifact', { answerFileHere: () => here });
    expect(result.answer).toMatchObject({ present: true, verified: true, path: here });
    // This daemon's copy wins over whatever now lies at the recorded path (someone else's, after a restore elsewhere).
    writeFileSync(recorded, 'The answer.\n');
    expect((await readBgResult(store, task, 'artifact', { answerFileHere: () => here })).answer).toMatchObject({ path: here });
    writeFileSync(here, 'Another answer.\n');
    await expect(readBgResult(store, task, 'auto', { answerFileHere: () => here })).rejects.toMatchObject({ code: 'artifact_error' });
  });
});
