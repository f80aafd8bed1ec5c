/**
 * `fusion sandbox exec` on every backend: the command runs under the candidate policy, its
 * output streams through, its exit code comes back.
 */
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_SANDBOX_UIDS } from '../../../src/launcher/uid-pool.js';
import { MAX_OUT_BYTES } from '../../../src/launcher/out-dir-usage.js';
import { OUT_PAGE_BYTES } from '../../../src/launcher/out-mount.js';
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

/** Apparent bytes of every file below `dir`. */
async function treeBytes(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    total += entry.isDirectory() ? await treeBytes(path) : (await stat(path)).size;
  }
  return total;
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
      // Exactly the documented three (docs/security.md#isolation-tiers): no HOSTNAME from the
      // engine; bwrap always adds PWD (the working directory, /repo) after its options apply.
      expect(r.env).toEqual(backend === 'bwrap' ? ['HOME', 'NODE_OPTIONS', 'PATH', 'PWD'] : ['HOME', 'NODE_OPTIONS', 'PATH']);
    });

    // The /out caps are the kernel's (src/launcher/out-mount.ts): a burst far beyond them into a
    // nested path is refused at the cap inside the sandbox, and the command's exit is 125.
    it.runIf(IS_ROOT)('stops a 300 MiB burst into a nested /out at the cap: exit 125, never more than the cap held', async () => {
      const io = captureIo();
      const out = await mkdtemp(join(tmpdir(), 'fusion-out-burst-'));
      try {
        const script = [
          "const fs = require('fs'); fs.mkdirSync('/out/a/b', { recursive: true });",
          "const fd = fs.openSync('/out/a/b/big', 'w'); const mib = Buffer.alloc(1 << 20, 1); let written = 0;",
          "try { for (let i = 0; i < 300; i++) written += fs.writeSync(fd, mib); } catch (e) { console.log('refused', e.code); }",
          "const st = fs.statfsSync('/out'); console.log(JSON.stringify({ written, used: (st.blocks - st.bfree) * st.bsize }));",
        ].join('\n');
        const code = await sandboxExecCommand(['exec', '--backend', backend, '--repo', scratch.repoDir, '--out', out, '--', 'node', '-e', script], {}, io);
        expect(code).toBe(125);
        expect(io.out()).toContain('refused ENOSPC');
        const measured = JSON.parse(io.out().trim().split('\n').pop() as string) as { written: number; used: number };
        // The backing file system never held more than the cap and its one page of evidence.
        expect(measured.used).toBeLessThanOrEqual(MAX_OUT_BYTES + OUT_PAGE_BYTES);
        expect(measured.written).toBeLessThanOrEqual(MAX_OUT_BYTES + OUT_PAGE_BYTES);
        expect(io.err()).toContain('/out over its cap');
        // What reaches the host outDir is capped too (the over-cap file is not copied).
        expect(await treeBytes(out)).toBeLessThanOrEqual(MAX_OUT_BYTES);
      } finally {
        await rm(out, { recursive: true, force: true });
      }
    }, 120_000);

    it.runIf(IS_ROOT)('counts a file opened in /out and then unlinked: exit 125', async () => {
      const io = captureIo();
      const script = [
        "const fs = require('fs'); const fd = fs.openSync('/out/hidden', 'w'); fs.unlinkSync('/out/hidden');",
        "const mib = Buffer.alloc(1 << 20, 1); let written = 0;",
        "try { for (let i = 0; i < 300; i++) written += fs.writeSync(fd, mib); } catch (e) { console.log('refused', e.code, written); }",
        "setInterval(() => undefined, 1000); // holds the descriptor until the supervision stops it",
      ].join('\n');
      const code = await sandboxExecCommand(['exec', '--backend', backend, '--repo', scratch.repoDir, '--', 'node', '-e', script], {}, io);
      expect(code).toBe(125);
      const refused = /refused ENOSPC (\d+)/.exec(io.out());
      expect(refused).not.toBeNull();
      expect(Number(refused?.[1])).toBeLessThanOrEqual(MAX_OUT_BYTES + OUT_PAGE_BYTES);
    }, 120_000);

    it.runIf(IS_ROOT)('mounts /out noexec: a binary written there does not run', async () => {
      const io = captureIo();
      const script = [
        "const fs = require('fs'); fs.copyFileSync(process.execPath, '/out/n'); fs.chmodSync('/out/n', 0o755);",
        "try { require('child_process').execFileSync('/out/n', ['-e', '0']); console.log('ran'); } catch (e) { console.log('refused'); }",
      ].join('\n');
      const code = await sandboxExecCommand(['exec', '--backend', backend, '--repo', scratch.repoDir, '--', 'node', '-e', script], {}, io);
      expect(code).toBe(0);
      expect(io.out().trim()).toBe('refused');
    }, 120_000);

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
