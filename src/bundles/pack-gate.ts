/**
 * How many repository packs run at once (docs/security.md#repository-bundles). A pack holds up
 * to the bundle cap in the daemon's memory (the child's stream, then the archive), and cluster
 * mode has no local admission bound, so without a gate one caller's burst of submits (256
 * connections × a 256 MiB repository) would pile gigabytes into the root daemon. At most
 * `total` packs run daemon-wide and at most one per key (a caller's uid): a caller that stalls
 * its own packs (a stopped child waits for its deadline) holds one place, never all of them.
 * Waiters are served in arrival order among those whose key is free.
 */

export interface PackGate {
  /** Runs `work` once a place is free for `key`. */
  run<T>(key: string, work: () => Promise<T>): Promise<T>;
}

export function createPackGate(total: number): PackGate {
  const active = new Set<string>();
  const waiting: Array<{ key: string; start: () => void }> = [];

  const pump = (): void => {
    for (let i = 0; i < waiting.length && active.size < total; ) {
      const w = waiting[i]!;
      if (active.has(w.key)) {
        i++;
        continue;
      }
      waiting.splice(i, 1);
      active.add(w.key);
      w.start();
    }
  };

  return {
    run(key, work) {
      return new Promise((resolve, reject) => {
        waiting.push({
          key,
          start: () => {
            Promise.resolve().then(work).then(resolve, reject).finally(() => {
              active.delete(key);
              pump();
            });
          },
        });
        pump();
      });
    },
  };
}
