/**
 * What an embedded daemon (`fusion investigate|research --wait` with none running) says on the
 * terminal. It runs in the CLI's own process, for a person who wants the task's progress and its
 * answer, not the daemon's JSON log: only records at the chosen level or above (default error;
 * `--log-level` / FUSION_LOG_LEVEL choose another) reach stderr as JSON, and a sandbox backend's
 * advice (LauncherCheck.warning, e.g. a stale child image) is one plain line whatever the level.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { createLogger, type Logger } from '../log.js';
import { LAUNCHER_WARNING_FIELD } from '../launcher/port.js';

/** The embedded daemon's default stderr level. */
export const EMBEDDED_LOG_LEVEL = 'error';

const levelValue = (name: string): number => (name === 'silent' ? Infinity : (pino.levels.values[name] ?? pino.levels.values.info!));

/** A logger for the embedded daemon writing to `write` (stderr) as described above. */
export function embeddedLogger(level: string | undefined, write: (text: string) => void): Logger {
  const threshold = levelValue(level ?? EMBEDDED_LOG_LEVEL);
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line.trim() === '') continue;
        let record: { level?: number; msg?: unknown; [LAUNCHER_WARNING_FIELD]?: unknown };
        try {
          record = JSON.parse(line) as typeof record;
        } catch {
          write(`${line}\n`);
          continue;
        }
        if ((record.level ?? 0) >= threshold) write(`${line}\n`);
        else if (record[LAUNCHER_WARNING_FIELD] === true) write(`warning: ${String(record.msg)}\n`);
      }
      done();
    },
  });
  // The logger keeps warn records too (below a higher threshold) so the backend's advice reaches the filter.
  const loggerLevel = threshold <= levelValue('warn') ? (level ?? EMBEDDED_LOG_LEVEL) : 'warn';
  return createLogger({ level: loggerLevel, destination });
}

/**
 * The one line a non-root user reads before an embedded daemon starts: what its sandboxes need
 * from this account (undefined as root, whose daemon sets its sandboxes up itself).
 */
export function embeddedUserNotice(uid: number | undefined): string | undefined {
  if (uid === undefined || uid === 0) return undefined;
  return `the embedded daemon runs as uid ${uid}: bwrap needs a delegated cgroup or the rlimit mode (FUSION_SANDBOX_RLIMIT=1), Docker needs the docker group\n`;
}
