/** The bundle cap setting (docs/operations.md#repository-bundles): FUSION_BUNDLE_MAX_MB, default 256 MiB, 1–1024. */
import { describe, expect, it } from 'vitest';
import { parseArgs } from '../../../src/config/args.js';
import { daemonConfigInput } from '../../../src/config/settings.js';
import { buildConfig } from '../../../src/main.js';

const build = (env: Record<string, string>) => buildConfig(daemonConfigInput(parseArgs(['--data', '/tmp/h'], { data: { value: true } }), env));

describe('FUSION_BUNDLE_MAX_MB', () => {
  it('defaults to 256 MiB, takes MiB, refuses values out of range at start-up', () => {
    expect(build({}).bundleMaxBytes).toBe(256 * 1024 * 1024);
    expect(build({ FUSION_BUNDLE_MAX_MB: '64' }).bundleMaxBytes).toBe(64 * 1024 * 1024);
    expect(() => build({ FUSION_BUNDLE_MAX_MB: '0' })).toThrow(/bundleMaxBytes/u);
    expect(() => build({ FUSION_BUNDLE_MAX_MB: '2048' })).toThrow(/bundleMaxBytes/u);
  });
});
