/**
 * A child image knows which child code it carries (src/launcher/child-code.ts): `make image`'s
 * script labels it with the digest of the staged code, computed by the same module the Docker
 * launcher uses, and the launcher's check warns loudly (still usable: every launch binds the
 * checkout's own child code over the image's copy) when the label is not this checkout's, naming
 * `make image`. Against the real engine, offline: the images are built from the local base under
 * tags of this test's own, never the shared `fusion-child:<version>`, and removed afterwards.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { childCodeDigest } from '../../../src/launcher/child-code.js';
import { CHILD_CODE_LABEL } from '../../../src/launcher/docker-config.js';
import { DIST, ROOT } from '../../helpers/gates.js';
import { captureLogs, createTestDockerLauncher, describeBackend } from '../containment/helpers.js';

const status = await createTestDockerLauncher(captureLogs().log).check();
const tag = `fusion-child-labeltest-${randomUUID().slice(0, 8)}`;
const FRESH = `${tag}:fresh`;
const STALE = `${tag}:stale`;

describeBackend('the child image and its child-code label', status, () => {
  beforeAll(() => {
    // The real script, under a tag of this test's own.
    const built = spawnSync('bash', ['scripts/build-child-image.sh'], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, CHILD_IMAGE: FRESH }, timeout: 240_000 });
    if (built.status !== 0) throw new Error(`build-child-image.sh failed:\n${built.stderr}`);
    const ctx = mkdtempSync(join(tmpdir(), 'fsn-stale-'));
    try {
      writeFileSync(join(ctx, 'Dockerfile'), `FROM ${FRESH}\nLABEL ${CHILD_CODE_LABEL}="sha256:${'0'.repeat(64)}"\n`);
      execFileSync('docker', ['build', '--quiet', '-t', STALE, ctx], { env: { ...process.env, DOCKER_BUILDKIT: '0' }, stdio: 'pipe' });
    } finally {
      rmSync(ctx, { recursive: true, force: true });
    }
  }, 300_000);
  afterAll(() => {
    spawnSync('docker', ['image', 'rm', '--force', STALE, FRESH], { stdio: 'ignore' });
  });

  it('make image labels the image with the digest of the code it staged, the one the launcher computes', async () => {
    const label = execFileSync('docker', ['image', 'inspect', '--format', `{{ index .Config.Labels "${CHILD_CODE_LABEL}" }}`, FRESH], { encoding: 'utf8' }).trim();
    expect(label).toBe(childCodeDigest(DIST));
    const staged = execFileSync('docker', ['run', '--rm', '--network', 'none', FRESH, 'node', '-e', 'console.log(require("fs").readdirSync("/opt/fusion").sort().join(" "))'], { encoding: 'utf8' }).trim();
    expect(staged).toBe('package.json sandbox src');
    // Asked again (as `make run` does every time), an image of this very code is left alone.
    const again = spawnSync('bash', ['scripts/build-child-image.sh'], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, CHILD_IMAGE: FRESH }, timeout: 120_000 });
    expect(again.status, again.stderr).toBe(0);
    expect(again.stderr).toContain(`${FRESH} is up to date (child code ${label})`);
    const logs = captureLogs();
    expect(await createTestDockerLauncher(logs.log, { image: FRESH }).check()).toEqual({ ok: true });
    expect(logs.lines().filter((l) => l.level === 40)).toEqual([]);
  });

  it('an image of other child code is usable but warned about, once, naming make image', async () => {
    const logs = captureLogs();
    const launcher = createTestDockerLauncher(logs.log, { image: STALE });
    const first = await launcher.check();
    expect(first.ok).toBe(true);
    expect(first.warning).toMatch(new RegExp(`^child image ${STALE} was built from other child code \\(sha256:0{12}…\\), not this checkout's \\(sha256:[0-9a-f]{12}…\\): .*run make image$`, 'u'));
    await launcher.check();
    const warnings = logs.lines().filter((l) => l.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.msg).toBe(first.warning);
  });
});
