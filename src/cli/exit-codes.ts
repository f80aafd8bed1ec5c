/**
 * The exit codes of `fusion`, one table: the CLI returns these, `fusion help` and README's exit
 * code table print them (README is tested equal to this table), so a script can trust them.
 */
export const EXIT = {
  ok: 0,
  failed: 1,
  usage: 2,
  noDaemon: 3,
  fetchFailed: 4,
  /** sysexits' EX_TEMPFAIL: not an error, ask again later. */
  stillRunning: 75,
  /** As timeout(1) and `fusion sandbox exec`. */
  timedOut: 124,
} as const;

export const EXIT_CODES: ReadonlyArray<{ code: number; meaning: string }> = [
  { code: EXIT.ok, meaning: 'success (for a task: it completed and its answer is verified)' },
  { code: EXIT.failed, meaning: 'the task failed or was cancelled, or a runtime error' },
  { code: EXIT.usage, meaning: 'invalid input or usage (nothing was started)' },
  { code: EXIT.noDaemon, meaning: 'no daemon answered, or it went away while waiting; fetch and search: refused by policy' },
  { code: EXIT.fetchFailed, meaning: 'fetch and search: any other fetch failure' },
  { code: EXIT.stillRunning, meaning: '`fusion result`: the task is still running (ask again, or `fusion wait ID`)' },
  { code: EXIT.timedOut, meaning: '`fusion wait --timeout`: timed out, the task is still running' },
];
