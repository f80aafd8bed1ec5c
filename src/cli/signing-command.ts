/**
 * `fusion keys signing-init` and `fusion keys signing-public`: the Ed25519 key pair that signs
 * every task tarball. The private key stays in the data directory (0600); the public key is
 * what an auditor pins (`fusion audit verify --pubkey FILE`).
 */
import { initSigningKey, loadSigningKey, signingKeyPaths } from '../audit/signing.js';
import { FusionError } from '../errors.js';
import { mkdirSync } from 'node:fs';
import { has, parseArgs, usageError } from '../config/args.js';
import { flagSpecFor } from '../config/options.js';
import { resolveHome, type Env } from '../config/settings.js';
import type { Io } from './commands.js';

export async function signingKeyCommand(argv: readonly string[], env: Env, io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, flagSpecFor('keys'), 'keys');
  const json = has(args, 'json');
  if (args.positionals.length > 0) throw usageError(`unexpected argument ${JSON.stringify(args.positionals[0])}`);
  const home = resolveHome(args, env);
  if (sub === 'signing-init') {
    mkdirSync(home, { recursive: true, mode: 0o700 });
    const key = initSigningKey(home);
    const paths = signingKeyPaths(home);
    io.stderr(`fusion: signing key created: ${paths.privateKey} (0600); public key ${paths.publicKey}\n`);
    io.stderr(`fusion: key id sha256:${key.publicKeySha256}; restart the daemon to sign new task tarballs\n`);
    io.stdout(json ? `${JSON.stringify({ keyId: `sha256:${key.publicKeySha256}`, publicKeyPem: key.publicKeyPem }, null, 2)}\n` : key.publicKeyPem);
    return 0;
  }
  if (sub === 'signing-public') {
    const key = loadSigningKey(home);
    if (key === null) throw new FusionError('not_found', `no signing key in ${home}; create one with: fusion keys signing-init`);
    io.stderr(`fusion: key id sha256:${key.publicKeySha256}\n`);
    io.stdout(json ? `${JSON.stringify({ keyId: `sha256:${key.publicKeySha256}`, publicKeyPem: key.publicKeyPem }, null, 2)}\n` : key.publicKeyPem);
    return 0;
  }
  throw usageError(`unknown keys subcommand ${JSON.stringify(sub)}; use signing-init or signing-public`);
}
