/**
 * Runs a caller-supplied regular expression over lines with a hard time limit.
 *
 * Why vm: V8's backtracking engine can take exponential time on patterns such as `(a+)+$`,
 * and a plain loop cannot be interrupted. `vm` with `timeout` arms a watchdog that terminates
 * the running script, regex included. The watchdog costs ~0.1 ms per run, so lines of many
 * files are scanned per run (a batch). No caller code is evaluated: the script is fixed and
 * the pattern only ever exists as a RegExp object.
 */
import vm from 'node:vm';

const SCAN_SOURCE = `(function () {
  const out = [];
  for (let f = 0; f < files.length; f++) {
    const lines = files[f];
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      if (line !== null && re.test(line)) {
        out.push(f, i);
        if (out.length >= max * 2) return out;
      }
    }
  }
  return out;
})()`;

/** Lines of one file; `null` marks a line excluded from matching (too long). */
export type ScanLines = readonly (string | null)[];

export type ScanResult = { timedOut: false; matches: [fileIndex: number, lineIndex: number][] } | { timedOut: true };

export class RegexScanner {
  private readonly context: vm.Context;
  private readonly script = new vm.Script(SCAN_SOURCE);

  constructor(re: RegExp) {
    // Stateless matching: test() on a /g or /y regex would move lastIndex between lines.
    const flags = re.flags.replace(/[gy]/g, '');
    this.context = vm.createContext({ re: new RegExp(re.source, flags), files: [], max: 0 });
  }

  /** Matches in file order, at most `maxMatches`. */
  scan(files: readonly ScanLines[], maxMatches: number, timeoutMs: number): ScanResult {
    if (maxMatches <= 0 || files.length === 0) return { timedOut: false, matches: [] };
    this.context['files'] = files;
    this.context['max'] = maxMatches;
    let flat: ArrayLike<number>;
    try {
      flat = this.script.runInContext(this.context, { timeout: Math.max(1, Math.ceil(timeoutMs)) }) as ArrayLike<number>;
    } catch (err) {
      if ((err as { code?: unknown } | null)?.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') return { timedOut: true };
      throw err;
    } finally {
      this.context['files'] = [];
    }
    const matches: [number, number][] = [];
    for (let k = 0; k + 1 < flat.length; k += 2) matches.push([flat[k] as number, flat[k + 1] as number]);
    return { timedOut: false, matches };
  }
}
