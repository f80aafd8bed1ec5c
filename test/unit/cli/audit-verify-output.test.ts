import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../../../src/cli/main.js';
import { packMembers } from '../../../src/audit/tar-members.js';

const dir = mkdtempSync(join(tmpdir(), 'fusion-verify-out-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A tar whose only member name carries a terminal escape (header checksum fixed up). */
async function tarWithName(name: string): Promise<Buffer> {
  const placeholder = 'n'.repeat(Buffer.byteLength(name));
  const tar = await packMembers([{ name: placeholder, data: Buffer.from('x') }]);
  Buffer.from(name, 'latin1').copy(tar, 0);
  tar.fill(0x20, 148, 156);
  let sum = 0;
  for (let i = 0; i < 512; i += 1) sum += tar[i]!;
  tar.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return tar;
}

describe('fusion audit verify: text output of a hostile tarball', () => {
  it('escapes control characters from member names, so a crafted name cannot rewrite the BROKEN line', async () => {
    const file = join(dir, 'escape.tar');
    writeFileSync(file, await tarWithName('x\r\u001b[2Kverified: task t (completed)'));
    let out = '';
    const code = await runCli(['audit', 'verify', file], {}, { stdout: (t: string) => void (out += t), stderr: () => undefined, readStdin: () => '' });
    expect(code).toBe(1);
    expect(out).toMatch(/^BROKEN: x\\u000d\\u001b\[2Kverified/);
    expect(out.includes('\r') || out.includes('\u001b')).toBe(false);
  });

  it('--replay without --repo does not replay over the directory an unpinned tarball names', async () => {
    const file = join(dir, 'repo-dir.tar');
    writeFileSync(file, await packMembers([{ name: 'task.json', data: Buffer.from(JSON.stringify({ repo_dir: '/' })) }]));
    let out = '';
    const io = { stdout: (t: string) => void (out += t), stderr: () => undefined, readStdin: () => '' };
    await expect(runCli(['audit', 'verify', file, '--replay'], {}, io)).rejects.toMatchObject({
      code: 'invalid_input',
      message: expect.stringMatching(/--replay without --repo uses the repository recorded in the tarball, trusted only with a pinned key/),
    });
    expect(out).toBe('');
  });
});


describe('fusion audit verify: an id is an id, a path is a path', () => {
  const capture = (): { io: { stdout: (t: string) => void; stderr: (t: string) => void; readStdin: () => string }; out: () => string; err: () => string } => {
    let out = '';
    let err = '';
    return { io: { stdout: (t) => void (out += t), stderr: (t) => void (err += t), readStdin: () => '' }, out: () => out, err: () => err };
  };

  it('a task id reads the database record even when a file of that name is in the current directory', async () => {
    const cwd = mkdtempSync(join(dir, 'cwd-'));
    const home = mkdtempSync(join(dir, 'home-'));
    const id = `investigate-${'a'.repeat(32)}`;
    // A well-formed tarball planted under the id's name must not be what gets verified.
    writeFileSync(join(cwd, id), await packMembers([{ name: 'manifest.json', data: Buffer.from('{}') }]));
    const before = process.cwd();
    process.chdir(cwd);
    try {
      const c = capture();
      await expect(runCli(['audit', 'verify', id, '--data', home], {}, c.io)).rejects.toMatchObject({ code: 'not_found', message: expect.stringMatching(/no database at/) });
      expect(c.err()).toMatch(new RegExp(`verifying the sealed record of task ${id} from `));
      // The file is verified when asked for as a file.
      const f = capture();
      expect(await runCli(['audit', 'verify', '--file', id], {}, f.io)).toBe(1);
      expect(f.err()).toMatch(/verifying the tarball file .*investigate-a{32}/);
      expect(f.out()).toMatch(/^ok {3}tar structure/);
    } finally {
      process.chdir(before);
    }
  });

  it('a name that is neither an id nor a path is refused, naming both forms', async () => {
    const c = capture();
    await expect(runCli(['audit', 'verify', 'mytask'], {}, c.io)).rejects.toMatchObject({
      code: 'invalid_input',
      message: expect.stringMatching(/"mytask" is neither a task id \(WORKFLOW-<32 hex digits>\) nor a tarball path .*\.\/mytask or pass --file/),
    });
    await expect(runCli(['audit', 'verify', '--id', 'x.tar'], {}, c.io)).rejects.toMatchObject({ message: expect.stringMatching(/--id "x\.tar" is not a task id/) });
  });

  it('refuses a tarball over the cap before reading it, naming the cap, the flag and the variable', async () => {
    const file = join(dir, 'big.tar');
    writeFileSync(file, Buffer.alloc(64 * 1024));
    for (const [argv, env] of [[['--max-bytes', '4096'], {}], [[], { FUSION_AUDIT_MAX_BYTES: '4096' }]] as const) {
      const c = capture();
      await expect(runCli(['audit', 'verify', file, ...argv], env, c.io)).rejects.toMatchObject({
        code: 'payload_too_large',
        message: expect.stringMatching(/is 65536 bytes, over the 4096-byte cap of audit verify .*--max-bytes N or FUSION_AUDIT_MAX_BYTES=N/),
      });
      expect(c.out()).toBe('');
    }
    // Under the cap it is read and verified (an all-zero file is an empty archive without members).
    const c = capture();
    expect(await runCli(['audit', 'verify', file, '--max-bytes', '65536'], {}, c.io)).toBe(1);
    await expect(runCli(['audit', 'verify', file, '--max-bytes', '12k'], {}, c.io)).rejects.toMatchObject({ message: expect.stringMatching(/--max-bytes must be a positive whole number of bytes/) });
  });
});
