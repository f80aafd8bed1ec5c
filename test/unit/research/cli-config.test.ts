import { describe, expect, it } from 'vitest';
import { parseArgs } from '../../../src/config/args.js';
import { daemonConfigInput } from '../../../src/config/settings.js';
import { buildConfig } from '../../../src/main.js';

const FLAGS = {
  data: { value: true }, socket: { value: true }, listen: { value: true }, 'listen-public': {}, 'research-store': { value: true },
  'research-db': { value: true }, 'research-user-agent': { value: true }, 'research-queue-prefix': { value: true },
};

describe('daemon research settings from flags and environment', () => {
  it('maps --listen, --listen-public, --research-* and REDIS_URL / RESEARCH_* into the config', () => {
    const args = parseArgs(['--data', '/tmp/h', '--listen', '127.0.0.1:8787', '--listen-public', '--research-store', 'memory', '--research-db', 'r.db', '--research-user-agent', 'Bot/1'], FLAGS);
    const config = buildConfig(daemonConfigInput(args, { REDIS_URL: 'redis://127.0.0.1:6390', RESEARCH_WORKER_CONCURRENCY: '7', RESEARCH_LOCK_DURATION_MS: '2000', RESEARCH_STALLED_INTERVAL_MS: '1000' }));
    expect(config).toMatchObject({
      listen: '127.0.0.1:8787', listenPublic: true, researchStore: 'memory', researchUserAgent: 'Bot/1', redisUrl: 'redis://127.0.0.1:6390',
      researchWorkerConcurrency: 7, researchLockMs: 2000, researchStalledMs: 1000,
    });
    expect(config.researchDb).toMatch(/\/r\.db$/);
  });

  it('defaults: no listener, SQLite, direct dispatch, 4 workers', () => {
    const config = buildConfig(daemonConfigInput(parseArgs(['--data', '/tmp/h'], FLAGS), {}));
    expect(config).toMatchObject({ listenPublic: false, researchStore: 'sqlite', researchWorkerConcurrency: 4 });
    expect(config.listen).toBeUndefined();
    expect(config.redisUrl).toBeUndefined();
  });

  it('refuses bad values at start-up', () => {
    const build = (argv: string[], env: Record<string, string> = {}): unknown => buildConfig(daemonConfigInput(parseArgs(['--data', '/tmp/h', ...argv], FLAGS), env));
    expect(() => build(['--research-store', 'disk'])).toThrow(/--research-store must be one of sqlite, memory/);
    expect(() => build([], { REDIS_URL: 'http://x' })).toThrow(/redisUrl/);
    expect(() => build([], { RESEARCH_WORKER_CONCURRENCY: '0' })).toThrow(/researchWorkerConcurrency/);
    expect(() => build(['--research-user-agent', 'Bo\nt'])).toThrow(/researchUserAgent/);
    expect(() => build(['--research-queue-prefix', 'a:b'])).toThrow(/researchQueuePrefix/);
  });

  it('the research queue prefix: --research-queue-prefix over FUSION_RESEARCH_QUEUE_PREFIX; unset by default', () => {
    const build = (argv: string[], env: Record<string, string> = {}) => buildConfig(daemonConfigInput(parseArgs(['--data', '/tmp/h', ...argv], FLAGS), env));
    expect(build([]).researchQueuePrefix).toBeUndefined();
    expect(build([], { FUSION_RESEARCH_QUEUE_PREFIX: 'cluster' }).researchQueuePrefix).toBe('cluster');
    expect(build(['--research-queue-prefix', 'bull'], { FUSION_RESEARCH_QUEUE_PREFIX: 'cluster' }).researchQueuePrefix).toBe('bull');
  });
});
