/**
 * The read-only binds that make the host's node runtime usable inside a bwrap sandbox: /usr and
 * the /bin, /lib… links or directories, the node install prefix when it lives outside /usr, and
 * the loader cache. Reads the host layout once per launcher.
 */
import { lstat, readlink, realpath } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { FusionError } from '../errors.js';
import type { Runtime } from './bwrap-args.js';

/** Binds /usr and mirrors /bin, /lib… (symlinks on usrmerge systems, directories elsewhere). */
export async function resolveRuntime(nodePath: string): Promise<Runtime> {
  const args = ['--ro-bind', '/usr', '/usr'];
  const bound = ['/usr'];
  for (const name of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
    const path = `/${name}`;
    try {
      const info = await lstat(path);
      if (info.isSymbolicLink()) args.push('--symlink', await readlink(path), path);
      else if (info.isDirectory()) {
        args.push('--ro-bind', path, path);
        bound.push(path);
      }
    } catch {
      // absent on this host
    }
  }
  const realNode = await realpath(nodePath);
  if (!bound.some((dir) => realNode.startsWith(`${dir}/`))) {
    // e.g. /opt/node-v20/bin/node: bind the whole install (lib/ next to bin/) read-only. Only a
    // recognisable install prefix is bound: for ~/bin/node the "prefix" would be a home directory.
    const prefix = dirname(dirname(realNode));
    const homeLike = prefix === '/' || /^\/(root|home\/[^/]+)(\/\.local)?$/.test(prefix) || homedir() === prefix;
    if (homeLike || dirname(realNode) !== join(prefix, 'bin')) {
      throw new FusionError('sandbox_unavailable', `the Node runtime ${realNode} is not in an install prefix that can be bound into a sandbox (it would expose ${prefix}); use a Node installed under /usr, /usr/local or /opt`);
    }
    args.push('--ro-bind', prefix, prefix);
  }
  args.push('--ro-bind-try', '/etc/ld.so.cache', '/etc/ld.so.cache');
  const pathDirs = [dirname(nodePath), dirname(realNode), '/usr/local/bin', '/usr/bin', '/bin'];
  return { mountArgs: args, defaultPath: [...new Set(pathDirs)].join(':') };
}
