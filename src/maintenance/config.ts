/**
 * Maintenance settings from the daemon's environment (the CLI passes it in). Durations accept a
 * number of milliseconds or a number with a unit (`90s`, `10m`, `6h`, `7d`); `0` disables a job.
 *
 *   FUSION_RETENTION_DAYS (30)          terminal tasks older than this are deleted
 *   FUSION_RETENTION_INTERVAL (6h)      how often retention runs
 *   FUSION_REAPER_INTERVAL (10m)        orphan reaper
 *   FUSION_REAPER_STALE_AFTER (2h)      a scratch/staging entry untouched this long is an orphan
 *   FUSION_STALE_SWEEP_INTERVAL (10m)   stale-task sweep
 *   FUSION_STALE_TASK_AFTER (1h)        a non-terminal task with no run for this long is failed
 *   FUSION_BACKUP_INTERVAL (24h)        online SQLite backup
 *   FUSION_BACKUP_DIR ($FUSION_HOME/backups)
 *   FUSION_BACKUP_KEEP (7)              backups kept
 *   FUSION_BACKUP_SIGNING_KEY (private) which half of the signing key a backup holds (private|public)
 */
import { join } from 'node:path';
import { FusionError } from '../errors.js';

export interface MaintenanceConfig {
  retentionDays: number;
  retentionIntervalMs: number;
  reaperIntervalMs: number;
  reaperStaleAfterMs: number;
  staleSweepIntervalMs: number;
  staleTaskAfterMs: number;
  backupIntervalMs: number;
  backupDir: string;
  backupKeep: number;
  backupSigningKey: 'private' | 'public';
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseDuration(name: string, text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!m) throw new FusionError('invalid_config', `${name} must be a duration like 30000, 90s, 10m, 6h or 7d, got ${JSON.stringify(text)}`);
  return Math.round(Number(m[1]) * UNITS[m[2] ?? 'ms']!);
}

/** An environment setting that must be a positive integer (invalid_config naming it otherwise). */
export function positiveInt(name: string, text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 1) throw new FusionError('invalid_config', `${name} must be a positive integer, got ${JSON.stringify(text)}`);
  return n;
}

function backupSigningKey(text: string | undefined): 'private' | 'public' {
  const value = (text ?? 'private').trim();
  if (value === 'private' || value === 'public') return value;
  throw new FusionError('invalid_config', `FUSION_BACKUP_SIGNING_KEY must be private or public, got ${JSON.stringify(text)}`);
}

export function maintenanceConfig(home: string, env: Record<string, string | undefined>, overrides: Partial<MaintenanceConfig> = {}): MaintenanceConfig {
  const dur = (name: string, fallback: string): number => parseDuration(name, env[name] ?? fallback);
  const config: MaintenanceConfig = {
    retentionDays: Number(env.FUSION_RETENTION_DAYS ?? 30),
    retentionIntervalMs: dur('FUSION_RETENTION_INTERVAL', '6h'),
    reaperIntervalMs: dur('FUSION_REAPER_INTERVAL', '10m'),
    reaperStaleAfterMs: dur('FUSION_REAPER_STALE_AFTER', '2h'),
    staleSweepIntervalMs: dur('FUSION_STALE_SWEEP_INTERVAL', '10m'),
    staleTaskAfterMs: dur('FUSION_STALE_TASK_AFTER', '1h'),
    backupIntervalMs: dur('FUSION_BACKUP_INTERVAL', '24h'),
    backupDir: env.FUSION_BACKUP_DIR ?? join(home, 'backups'),
    backupKeep: positiveInt('FUSION_BACKUP_KEEP', env.FUSION_BACKUP_KEEP ?? '7'),
    backupSigningKey: backupSigningKey(env.FUSION_BACKUP_SIGNING_KEY),
    ...overrides,
  };
  if (!Number.isFinite(config.retentionDays) || config.retentionDays < 0) {
    throw new FusionError('invalid_config', `FUSION_RETENTION_DAYS must be a non-negative number, got ${JSON.stringify(env.FUSION_RETENTION_DAYS)}`);
  }
  return config;
}
