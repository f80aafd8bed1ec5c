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

