/**
 * Proves the bwrap launcher's limits against real sandboxes: process and memory caps (with every
 * mechanism that works on this machine), wall and idle timeouts, the SIGTERM→grace→SIGKILL
 * sequence, output caps, abort, and launch failures.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createBwrapLauncher, type BwrapLauncher } from '../../../src/launcher/bwrap.js';
import { FusionError } from '../../../src/errors.js';
import { silentLogger } from '../../../src/log.js';
import { captureLogs, describeWithBwrap, IS_ROOT, limits, makeScratch, probe, run, type Scratch } from './helpers.js';
import { waitFor } from '../../helpers/wait.js';

const MiB = 1024 * 1024;

describeWithBwrap('bwrap launcher: limits', () => {
  let scratch: Scratch;
  let launcher: BwrapLauncher;

  beforeAll(async () => {
    scratch = await makeScratch();
    launcher = createBwrapLauncher({ log: silentLogger() });
  });

  afterAll(async () => {
    await scratch.cleanup();
  });

  it('uses cgroups when running as root on a host with a writable memory+pids hierarchy', async () => {
    const mechanism = await launcher.limitMechanism();
    console.info(`bwrap cap mechanism on this machine: ${mechanism}`);
    if (IS_ROOT) expect(mechanism).toMatch(/^cgroup-v[12]$/);
  });

  for (const mechanism of ['auto', 'rlimit'] as const) {
    it(`[${mechanism}] a fork bomb is stopped by the process cap`, async () => {
      const l = mechanism === 'auto' ? launcher : createBwrapLauncher({ log: silentLogger(), limits: 'rlimit' });
      const maxProcesses = 40;
      const { exit, stdout } = await run(l, scratch, {
        command: probe('fork-bomb.mjs'),
        limits: limits({ maxProcesses, wallMs: 30_000 }),
      });
      expect(exit.reason).toBe('exited');
      const report = JSON.parse(stdout) as { started: number; error: string | null };
      expect(report.error).toBe('EAGAIN');
      // node's own threads count against the cap too, so fewer than maxProcesses children start.
      expect(report.started).toBeGreaterThan(0);
      expect(report.started).toBeLessThan(maxProcesses);
    });

    it(`[${mechanism}] an oversized allocation is stopped by the memory cap`, async () => {
      const logs = captureLogs();
      const l = createBwrapLauncher({ log: logs.log, limits: mechanism });
      const actual = await l.limitMechanism();
      const { exit, stdout } = await run(l, scratch, {
        command: probe('memory-hog.mjs', String(1024 * MiB)),
        limits: limits({ memoryBytes: 192 * MiB, wallMs: 60_000 }),
      });
      expect(stdout).not.toContain('ALLOCATED_ALL');
      if (actual === 'rlimit') {
        // RLIMIT_DATA: the allocation fails inside node, which dies of it.
        expect(exit.exitCode).not.toBe(0);
      } else {
        // cgroup: the kernel OOM killer kills the process, and the exit line says so.
        expect(exit).toMatchObject({ reason: 'signaled', signal: 'SIGKILL' });
        const exitLine = logs.lines().find((l) => l.msg === 'sandbox exited');
        expect(exitLine?.oomKills).toBeGreaterThanOrEqual(1);
      }
    });
  }

  it('the wall timeout kills a child that keeps talking', async () => {
    const { exit, stdout } = await run(launcher, scratch, {
      command: probe('chatty.mjs', '100'),
      limits: limits({ wallMs: 1_500, idleMs: 60_000 }),
    });
    expect(exit.reason).toBe('wall_timeout');
    expect(stdout).toContain('tick');
    expect(exit.durationMs).toBeGreaterThanOrEqual(1_500);
    expect(exit.durationMs).toBeLessThan(10_000);
  });

  it('the idle timeout kills a silent child', async () => {
    const { exit, stdout } = await run(launcher, scratch, {
      command: probe('sleep.mjs'),
      limits: limits({ idleMs: 1_000 }),
    });
    expect(exit.reason).toBe('idle_timeout');
    expect(stdout).toBe('ready\n');
    expect(exit.durationMs).toBeGreaterThanOrEqual(1_000);
    expect(exit.durationMs).toBeLessThan(10_000);
  });

  it('markActivity() keeps a silent child alive past the idle timeout', async () => {
    let timer: NodeJS.Timeout | undefined;
    const { exit, stdout } = await run(launcher, scratch, {
      command: probe('sleep.mjs', '2500'),
      limits: limits({ idleMs: 1_000 }),
    }, (handle) => {
      timer = setInterval(() => handle.markActivity(), 300);
    });
    clearInterval(timer);
    expect(exit).toMatchObject({ reason: 'exited', exitCode: 0 });
    expect(stdout).toBe('ready\nwoke\n');
  });

  for (const mechanism of ['auto', 'rlimit'] as const) {
    it(`[${mechanism}] kill(): SIGTERM first, SIGKILL after the grace period for a child that ignores SIGTERM`, async () => {
      // With cgroups the SIGTERM goes to the cgroup's processes, without to the sandbox's process tree.
      const l = mechanism === 'auto' ? launcher : createBwrapLauncher({ log: silentLogger(), limits: 'rlimit' });
      const graceMs = 1_500;
      let stdout = '';
      const handle = await l.launch({
        taskId: 'task-e2e', label: 'sigterm', repoDir: scratch.repoDir, outDir: scratch.outDir,
        codeDir: join(import.meta.dirname, '../../fixtures/probes'),
        command: probe('ignore-sigterm.mjs'),
        limits: limits({ killGraceMs: graceMs }),
        onStdout: (chunk) => {
          stdout += chunk.toString('utf8');
        },
      });
      await waitFor('the probe to say ready', () => stdout.includes('ready'), 30_000);
      const started = performance.now();
      await handle.kill('aborted');
      const elapsed = performance.now() - started;
      const exit = await handle.exit;
      expect(stdout).toContain('got SIGTERM, ignoring it');
      expect(elapsed).toBeGreaterThanOrEqual(graceMs - 50);
      expect(elapsed).toBeLessThan(graceMs + 5_000);
      expect(exit.reason).toBe('aborted');
      expect(exit.signal).toBe('SIGKILL');
    });
  }

  it('kill(): a child that honours SIGTERM goes at once', async () => {
    let stdout = '';
    const handle = await launcher.launch({
      taskId: 'task-e2e', label: 'sigterm-ok', repoDir: scratch.repoDir, outDir: scratch.outDir,
      codeDir: join(import.meta.dirname, '../../fixtures/probes'),
      command: probe('sleep.mjs'),
      limits: limits({ killGraceMs: 10_000 }),
      onStdout: (chunk) => {
        stdout += chunk.toString('utf8');
      },
    });
    await waitFor('the probe to say ready', () => stdout.includes('ready'), 30_000);
    const started = performance.now();
    await handle.kill('aborted');
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(await handle.exit).toMatchObject({ reason: 'aborted', signal: 'SIGTERM' });
  });

  it('the stdout cap kills with reason output_cap and delivers no byte beyond it', async () => {
    let delivered = 0;
    const { exit } = await run(launcher, scratch, {
      command: probe('flood.mjs'),
      limits: limits({ maxStdoutBytes: MiB }),
      onStdout: (chunk) => {
        delivered += chunk.length;
      },
    });
    expect(exit.reason).toBe('output_cap');
    expect(delivered).toBe(MiB);
    expect(exit.stdoutBytes).toBeGreaterThan(MiB);
  });

  it('the stderr cap kills with reason output_cap', async () => {
    const { exit } = await run(launcher, scratch, {
      command: probe('flood.mjs', 'stderr'),
      limits: limits({ maxStderrBytes: 256 * 1024 }),
    });
    expect(exit.reason).toBe('output_cap');
    expect(exit.stderrBytes).toBeGreaterThan(256 * 1024);
  });

  it('an abort signal kills the sandbox', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 700); // the abort is the subject, mid-sleep
    const { exit } = await run(launcher, scratch, { command: probe('sleep.mjs'), signal: controller.signal });
    expect(exit.reason).toBe('aborted');
    expect(exit.durationMs).toBeLessThan(5_000);
  });

  it('an abort during the launch cancels it or kills the fresh sandbox, and leaves no process behind', async () => {
    // Regression: killing bwrap between its clone() and the release of its child (before
    // --die-with-parent is armed there) orphaned the child, blocked forever on an eventfd.
    const marker = `abort-race-${process.pid}-${Date.now()}`;
    for (const delayMs of [0, 1, 2, 3, 5, 8, 12, 20, 30, 50]) {
      const controller = new AbortController();
      setTimeout(() => controller.abort(), delayMs);
      const outcome = await run(launcher, scratch, { command: probe('sleep.mjs', '0', marker), signal: controller.signal })
        .then((r) => r.exit.reason, (e: unknown) => (e as FusionError).code);
      expect(['cancelled', 'aborted']).toContain(outcome);
    }
    const survivors = async (): Promise<string[]> => {
      const found: string[] = [];
      for (const pid of await readdir('/proc')) {
        if (!/^\d+$/.test(pid)) continue;
        const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
        const state = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
        if (cmdline.includes(marker) && !/\) Z /.test(state)) found.push(`${pid}: ${cmdline.replace(/\0/g, ' ')}`);
      }
      return found;
    };
    await waitFor('no probe left behind', async () => (await survivors()).length === 0, 10_000, 100).catch(() => undefined);
    expect(await survivors()).toEqual([]);
  });

  it('an already-aborted signal launches nothing', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(run(launcher, scratch, { command: probe('sleep.mjs'), signal: controller.signal }))
      .rejects.toMatchObject({ code: 'cancelled' });
  });

  it('reports exit codes and stream tails', async () => {
    const { exit } = await run(launcher, scratch, { command: probe('exit-code.mjs', '7') });
    expect(exit).toMatchObject({ reason: 'exited', exitCode: 7, signal: null, stdoutTail: 'out line\n', stderrTail: 'err line\n' });
  });

  it('a missing repository is a non-retryable launch_failed', async () => {
    const error = await run(launcher, scratch, { command: ['true'], repoDir: join(scratch.root, 'nope') }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FusionError);
    expect(error).toMatchObject({ code: 'launch_failed', retryable: false });
  });

  it('a command that does not exist exits non-zero with bwrap\'s message', async () => {
    const { exit } = await run(launcher, scratch, { command: ['/usr/bin/definitely-not-here'] });
    expect(exit.reason).toBe('exited');
    expect(exit.exitCode).not.toBe(0);
    expect(exit.stderrTail).toMatch(/definitely-not-here/);
  });

  it.runIf(IS_ROOT)('refuses a repository the sandbox uid cannot read, naming the path', async () => {
    const { mkdir, chmod } = await import('node:fs/promises');
    const secret = join(scratch.root, 'private-repo');
    await mkdir(secret, { mode: 0o700 });
    await chmod(secret, 0o700);
    const error = await run(launcher, scratch, { command: ['true'], repoDir: secret }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'launch_failed', retryable: false });
    expect((error as Error).message).toContain(secret);
  });
});
