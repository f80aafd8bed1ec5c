/**
 * `fusion sandbox exec` on every backend: the command runs under the candidate policy, its
 * output streams through, its exit code comes back.
 */
import { DEFAULT_SANDBOX_UIDS } from '../../../src/launcher/uid-pool.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sandboxExecCommand } from '../../../src/cli/sandbox-command.js';
import type { Io } from '../../../src/cli/commands.js';
import { backendAvailability, BACKENDS, describeBackend, IS_ROOT, makeScratch, type Scratch } from './helpers.js';

const availability = await backendAvailability();

function captureIo(): Io & { out: () => string; err: () => string } {
  let out = '';
  let err = '';
  return {
    stdout: (t) => {
      out += t;
    },
    stderr: (t) => {
      err += t;
    },
    readStdin: () => '',
    out: () => out,
    err: () => err,
  };
}

for (const backend of BACKENDS) {
  describeBackend(`fusion sandbox exec [${backend}]`, availability[backend], () => {
    let scratch: Scratch;
    beforeAll(async () => {
      scratch = await makeScratch(`fusion-sandbox-exec-${backend}-`);
    });
    afterAll(async () => {
      await scratch.cleanup();
    });

    it('runs the command under the candidate policy, streams its output and returns its exit code', async () => {
      const io = captureIo();
      const script = [
        "const fs = require('fs');",
        "console.log(JSON.stringify({ uid: process.getuid(), repo: fs.readdirSync('/repo').sort(), env: Object.keys(process.env).sort(),",
        "  net: fs.readFileSync('/proc/net/dev', 'utf8').split('\\n').slice(2).map((l) => l.split(':')[0].trim()).filter(Boolean),",
        "  repoWrite: (() => { try { fs.writeFileSync('/repo/x', ''); return 'ok'; } catch (e) { return e.code; } })() }));",
        "console.error('to stderr'); process.exitCode = 7;",
      ].join('\n');
      const code = await sandboxExecCommand(['exec', '--backend', backend, '--repo', scratch.repoDir, '--', 'node', '-e', script], {}, io);
      expect(code).toBe(7);
      expect(io.err()).toBe('to stderr\n');
      const r = JSON.parse(io.out()) as { uid: number; repo: string[]; env: string[]; net: string[]; repoWrite: string };
      if (IS_ROOT) expect(r.uid).toBeGreaterThanOrEqual(DEFAULT_SANDBOX_UIDS.start); // a uid of its own, never 65534
      expect(r.repo).toEqual(['README.md', 'src']);
      expect(r.net).toEqual(['lo']);
      expect(r.repoWrite).toBe(backend === 'gvisor' ? 'EACCES' : 'EROFS'); // gVisor checks permissions first
      for (const key of ['HOME', 'NODE_OPTIONS', 'PATH']) expect(r.env).toContain(key);
    });

    it('reports death by signal as 128+N', async () => {
      const io = captureIo();
      const code = await sandboxExecCommand(['exec', '--backend', backend, '--repo', scratch.repoDir, '--', 'node', '-e', "process.kill(process.pid, 'SIGKILL')"], {}, io);
      expect(code).toBe(137);
    });

    it('usage errors name the problem', async () => {
      const io = captureIo();
      await expect(sandboxExecCommand(['exec', '--backend', backend], {}, io)).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/needs a command after --/) });
      await expect(sandboxExecCommand(['exec', '--backend', 'vm', '--', 'true'], {}, io)).rejects.toMatchObject({ code: 'invalid_input' });
      await expect(sandboxExecCommand(['run', '--', 'true'], {}, io)).rejects.toMatchObject({ code: 'invalid_input' });
    });
  });
}
