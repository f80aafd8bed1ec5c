/**
 * `fusion keys create|list|revoke`: workspace API keys for the research API. Works on the
 * research store file directly (no daemon needed): the data directory's store, or --research-db,
 * or in cluster mode the shared PostgreSQL database (--database-url / FUSION_DATABASE_URL).
 * The key is printed once, alone on its stdout line; only its sha256 is stored.
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { createLogger } from '../log.js';
import { API_KEY_KINDS, type ApiKeyKind } from '../contracts/research.js';
import { issueKey } from '../research/api-keys.js';
import { keyNotFound, openResearchSqliteStore } from '../store/research-sqlite-store.js';
import { openResearchPgStore } from '../store/pg-store.js';
import type { ApiKeyStore, ResearchRunStore } from '../store/research-port.js';
import { researchDbFileOf } from '../main.js';
import { flag, has, parseArgs, usageError } from '../config/args.js';
import { flagSpecFor } from '../config/options.js';
import { resolveHome, type Env } from '../config/settings.js';
import type { Io } from './commands.js';

const KEYS_FLAGS = flagSpecFor('keys');

export async function keysCommand(argv: readonly string[], env: Env, io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, KEYS_FLAGS);
  const home = resolveHome(args, env);
  const researchDb = flag(args, 'research-db') ?? env.FUSION_RESEARCH_DB;
  const databaseUrl = (flag(args, 'database-url') ?? env.FUSION_DATABASE_URL)?.trim();
  const file = databaseUrl ? { url: databaseUrl } : researchDbFileOf({ home, researchDb: researchDb ? resolve(researchDb) : undefined });
  if (sub !== 'create' && sub !== 'list' && sub !== 'revoke') throw usageError(`fusion keys needs create, list or revoke; got ${JSON.stringify(sub ?? '')}`);
  if (sub === 'create') {
    const workspace = flag(args, 'workspace');
    const kind = flag(args, 'kind');
    if (!workspace) throw usageError('fusion keys create needs --workspace W');
    if (!kind || !(API_KEY_KINDS as readonly string[]).includes(kind)) throw usageError(`--kind must be one of ${API_KEY_KINDS.join(', ')}`);
    return withStore(file, async (store) => {
      const issued = await issueKey(store, workspace, kind as ApiKeyKind);
      const r = issued.record;
      io.stdout(has(args, 'json') ? `${JSON.stringify({ key: issued.key, id: r.id, workspaceId: r.workspaceId, kind: r.kind, createdAt: r.createdAt }, null, 2)}\n` : `${issued.key}\n`);
      io.stderr(`created ${issued.record.kind} key ${issued.record.id} for workspace ${issued.record.workspaceId}; it is shown only this once (the store keeps its sha256)\n`);
      return 0;
    });
  }
  if (sub === 'list') {
    return withStore(file, async (store) => {
      const keys = (await store.listKeys()).map((k) => ({ id: k.id, workspaceId: k.workspaceId, kind: k.kind, createdAt: k.createdAt, revokedAt: k.revokedAt }));
      if (has(args, 'json')) io.stdout(`${JSON.stringify({ keys }, null, 2)}\n`);
      else for (const k of keys) io.stdout(`${k.id}  ${k.kind.padEnd(9)}  ${k.workspaceId}  created ${k.createdAt}${k.revokedAt ? `  revoked ${k.revokedAt}` : ''}\n`);
      return 0;
    });
  }
  const id = args.positionals[0];
  if (!id) throw usageError('fusion keys revoke needs a key id (see fusion keys list)');
  return withStore(file, async (store) => {
    const key = await store.revokeKey(id);
    if (key === null) throw keyNotFound(id);
    io.stderr(`revoked key ${key.id} (${key.kind}, workspace ${key.workspaceId}) at ${key.revokedAt ?? '?'}\n`);
    return 0;
  });
}

async function withStore<T>(where: string | { url: string }, fn: (store: ResearchRunStore & ApiKeyStore) => Promise<T>): Promise<T> {
  const log = createLogger({ level: 'warn' });
  let store: ResearchRunStore & ApiKeyStore;
  if (typeof where === 'string') {
    // Same rules as the daemon's data directory: created private.
    mkdirSync(dirname(where), { recursive: true, mode: 0o700 });
    store = await openResearchSqliteStore({ file: where, log });
  } else {
    store = await openResearchPgStore({ url: where.url, log, maxConnections: 1 });
  }
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}
