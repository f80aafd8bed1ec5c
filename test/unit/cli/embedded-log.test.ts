/**
 * What the embedded daemon of `--wait` writes on the terminal (src/cli/embedded-log.ts): errors
 * only by default, a sandbox backend's warning as one plain line, the level flag still obeyed,
 * and the one-line notice for a non-root user.
 */
import { describe, expect, it } from 'vitest';
import { embeddedLogger, embeddedUserNotice } from '../../../src/cli/embedded-log.js';
import { LAUNCHER_WARNING_FIELD } from '../../../src/launcher/port.js';
import { waitFor } from '../../helpers/wait.js';

async function logged(level: string | undefined, emit: (log: ReturnType<typeof embeddedLogger>) => void, expectEnd: RegExp): Promise<string> {
  let out = '';
  const log = embeddedLogger(level, (t) => void (out += t));
  emit(log);
  log.error({ end: true }, 'end marker');
  await waitFor('the end marker', () => expectEnd.test(out), 5_000, 10);
  return out;
}

describe('the embedded daemon log on the terminal', () => {
  it('by default: no warn-level JSON; errors as JSON; the launcher warning as one plain line', async () => {
    const out = await logged(undefined, (log) => {
      log.warn({ releasedClaims: 2 }, "leftovers of a stopped daemon's sandboxes removed");
      log.warn({ home: '/h' }, 'no signing key: task tarballs are sealed unsigned');
      log.info({}, 'fusion daemon listening');
      log.warn({ image: 'fusion-child:1', [LAUNCHER_WARNING_FIELD]: true }, 'child image fusion-child:1 was built from other child code; run make image');
    }, /end marker/u);
    const lines = out.trimEnd().split('\n');
    expect(lines[0]).toBe('warning: child image fusion-child:1 was built from other child code; run make image');
    expect(lines).toHaveLength(2);
    expect(JSON.parse(lines[1]!)).toMatchObject({ level: 50, msg: 'end marker' });
    expect(out).not.toMatch(/leftovers|signing key|listening/u);
  });

  it('--log-level / FUSION_LOG_LEVEL still choose the level', async () => {
    const out = await logged('info', (log) => {
      log.warn({}, 'a warning');
      log.info({}, 'an info');
      log.debug({}, 'a debug');
    }, /end marker/u);
    expect(out).toMatch(/"msg":"a warning"/u);
    expect(out).toMatch(/"msg":"an info"/u);
    expect(out).not.toMatch(/a debug/u);
  });

  it('tells a non-root user in one line what the sandboxes need; nothing for root', () => {
    expect(embeddedUserNotice(0)).toBeUndefined();
    expect(embeddedUserNotice(1000)).toBe('the embedded daemon runs as uid 1000: bwrap needs a delegated cgroup or the rlimit mode (FUSION_SANDBOX_RLIMIT=1), Docker needs the docker group\n');
  });
});
