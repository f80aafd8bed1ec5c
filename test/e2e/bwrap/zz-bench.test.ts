import { spawn } from 'node:child_process';
import { it } from 'vitest';
import { createBwrapLauncher } from '../../../src/launcher/bwrap.js';
import { silentLogger } from '../../../src/log.js';
import { makeScratch, run, limits } from './helpers.js';

function time(cmd: string, args: string[]): Promise<number> {
  const t = performance.now();
  return new Promise((resolve, reject) => {
    const c = spawn(cmd, args, { stdio: 'ignore' });
    c.on('close', (code) => (code === 0 ? resolve(performance.now() - t) : reject(new Error(`${cmd} ${code}`))));
  });
}
const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]!.toFixed(1); };

it('bench', async () => {
  const s = await makeScratch();
  const N = 15;
  const bare = ['--unshare-all', '--ro-bind', '/usr', '/usr', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--symlink', 'usr/bin', '/bin', '--proc', '/proc', '--dev', '/dev'];
  const results: Record<string, number[]> = { nodeHost: [], bareBwrapNode: [], bareBwrapTrue: [], launcherNode: [], launcherTrue: [], launcherNodeRlimit: [] };
  const l = createBwrapLauncher({ log: silentLogger() });
  const lr = createBwrapLauncher({ log: silentLogger(), limits: 'rlimit' });
  await run(l, s, { command: ['true'] });
  await run(lr, s, { command: ['true'] });
  for (let i = 0; i < N; i++) {
    results.nodeHost!.push(await time('/usr/bin/node', ['-e', '0']));
    results.bareBwrapNode!.push(await time('/usr/bin/bwrap', [...bare, '/usr/bin/node', '-e', '0']));
    results.bareBwrapTrue!.push(await time('/usr/bin/bwrap', [...bare, '/usr/bin/true']));
    let t = performance.now(); await run(l, s, { command: ['node', '-e', '0'], limits: limits() }); results.launcherNode!.push(performance.now() - t);
    t = performance.now(); await run(l, s, { command: ['true'] }); results.launcherTrue!.push(performance.now() - t);
    t = performance.now(); await run(lr, s, { command: ['node', '-e', '0'] }); results.launcherNodeRlimit!.push(performance.now() - t);
  }
  console.log(Object.fromEntries(Object.entries(results).map(([k, v]) => [k, median(v)])));
  await s.cleanup();
}, 300_000);
