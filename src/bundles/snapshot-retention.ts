/**
 * The retention of repository snapshots (docs/operations.md#repository-snapshots), run with the
 * task retention job: stored bundles (`repo_bundles` rows) and unpacked trees under
 * `<data>/bundles/` that no non-terminal task names and that are older than the retention are
 * removed. A tree a run of this daemon holds (bundle-cache.ts `pin`) is never removed, nor one
 * used within the retention (a reuse marks it used), so a task waiting or resuming keeps the
 * snapshot it started over.
 */
import type { Logger } from '../log.js';
import type { Store } from '../store/port.js';
import type { BundleCache } from './bundle-cache.js';

export interface SnapshotRetentionInput {
  store: Pick<Store, 'listLiveBundleDigests' | 'pruneRepoBundles'>;
  cache: Pick<BundleCache, 'prune'>;
  olderThanDays: number;
  now?: number;
  log: Logger;
}

export async function pruneRepoSnapshots(input: SnapshotRetentionInput): Promise<{ trees: number; bundles: number }> {
  const cutoffMs = (input.now ?? Date.now()) - input.olderThanDays * 86_400_000;
  const live = await input.store.listLiveBundleDigests();
  const trees = await input.cache.prune(live, cutoffMs);
  const bundles = await input.store.pruneRepoBundles(new Date(cutoffMs).toISOString());
  if (trees.length + bundles > 0) input.log.info({ trees: trees.length, bundles }, 'retention: repository snapshots pruned');
  return { trees: trees.length, bundles };
}
