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
  /**
   * sysexits' EX_NOINPUT ("input … not readable"): the task completed and its answer verified, but
   * it read none of its declared sources or repository files. Not 0, so `if fusion …` does not
   * take an answer written from nothing for a success; not 1, so a script can tell it from a failure.
   */
  nothingRead: 66,
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
  { code: EXIT.nothingRead, meaning: 'the task completed and its answer is verified, but it read nothing: none of its declared sources (research) or none of the repository\'s files (`nothingRead: true` in --json)' },
  { code: EXIT.stillRunning, meaning: '`fusion result`: the task is still running (ask again, or `fusion wait ID`)' },
  { code: EXIT.timedOut, meaning: '`fusion wait --timeout`: timed out, the task is still running' },
];

/**
 * The exit code for a task that ended, the one mapping `--wait`, `fusion wait` and `fusion result`
 * share: a completed task is 0, or `nothingRead` when it read none of its sources or files
 * (bg_result's and /wait's `nothingRead`, docs/behaviour.md#nothing-read); failed or cancelled is 1.
 */
export function endedTaskExit(status: string, nothingRead: boolean | undefined): number {
  if (status !== 'completed') return EXIT.failed;
  return nothingRead === true ? EXIT.nothingRead : EXIT.ok;
}
