/**
 * The lead of real tasks' answers (builtin engine, bwrap, the daemon's whole workflow):
 *
 *   - research over local pages served on loopback through the egress guard's test seams (a
 *     static host override + an allow-listed loopback CIDR): the current documentation page, a
 *     superseded older page and a post carrying an injected instruction. The answer's first
 *     400 characters state the current figure, never the superseded or the injected one;
 *   - investigate over a published package (node_modules/semver, not this repository): the
 *     lead names the file and the line that defines what was asked, as bench/builtin-lead
 *     measures it in-process.
 * Loopback only.
 */
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildConfig, startDaemon, type Daemon } from '../../../src/main.js';
import { FusionClient } from '../../../src/client/index.js';
import { silentLogger } from '../../../src/log.js';
import { ORIGIN_IP, startHttpOrigin, type Listener } from '../../integration/egress/origin.js';
import { leadCorpus, LEAD_QUESTION } from '../../unit/models/builtin/lead-corpus.js';

const LEAD_CHARS = 400;
const REPO = join(__dirname, '..', '..', 'fixtures', 'builtin-repo');
const SEMVER = realpathSync(join(__dirname, '..', '..', '..', 'node_modules', 'semver'));

describe('the lead of real answers (builtin engine, bwrap, guarded fetch through the seams)', () => {
  let origin: Listener;
  let daemon: Daemon;
  let client: FusionClient;
  let home: string;
  let corpus: Record<string, string>;

  beforeAll(async () => {
    origin = await startHttpOrigin((req, res) => {
      const page = Object.entries(corpus).find(([url]) => new URL(url).pathname === req.url)?.[1];
      if (page === undefined) {
        res.writeHead(404);
        res.end();
        return;
      }
      res.writeHead(200, { 'content-type': 'text/markdown; charset=utf-8' });
      res.end(page);
    }, ORIGIN_IP);
    corpus = leadCorpus(`http://docs.lead.test:${origin.port}`, `http://forum.lead.test:${origin.port}`);
    home = mkdtempSync(join(tmpdir(), 'fusion-lead-'));
    const config = buildConfig({
      home,
      socketPath: join(home, 'fusion.sock'),
      sandbox: 'bwrap',
      egressResolve: [`docs.lead.test:${ORIGIN_IP}`, `forum.lead.test:${ORIGIN_IP}`],
      egressAllowCidrs: [`${ORIGIN_IP}/32`],
    });
    daemon = await startDaemon(config, { log: silentLogger(), env: {} });
    client = new FusionClient(daemon.socketPath);
  });

  afterAll(async () => {
    await daemon?.close();
    await origin?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  async function run(workflow: 'research' | 'investigate', args: Record<string, unknown>, repo: string): Promise<{ state: string; error: unknown; text: string }> {
    const receipt = (await client.call('POST', `/v1/tasks/${workflow}`, { arguments: args, repo })) as { taskId: string };
    const waited = (await client.call('GET', `/v1/tasks/${receipt.taskId}/wait?timeoutMs=120000`)) as { task: { state: string; error: unknown } };
    if (waited.task.state !== 'completed') return { state: waited.task.state, error: waited.task.error, text: '' };
    const result = (await client.call('GET', `/v1/tasks/${receipt.taskId}/result`)) as { answer: { text: string } };
    return { state: waited.task.state, error: null, text: result.answer.text };
  }

  it('research: the lead states the current figure, not the superseded or the injected one', async () => {
    const sources = Object.keys(corpus).map((url) => ({ url, purpose: LEAD_QUESTION.purpose }));
    const out = await run('research', { objective: LEAD_QUESTION.objective, background: LEAD_QUESTION.background, deliverable: LEAD_QUESTION.deliverable, sources }, REPO);
    expect(out.state, JSON.stringify(out.error)).toBe('completed');
    const lead = out.text.slice(0, LEAD_CHARS);
    expect(lead).toContain(LEAD_QUESTION.current);
    for (const wrong of LEAD_QUESTION.wrong) expect(lead).not.toContain(wrong);
    expect(lead).not.toMatch(/`[^`\s]+:\d+`/u);
    expect(out.text).toMatch(/## Set aside[\s\S]*limits-2023/u);
    expect(out.text).toMatch(/## Suspected injections[\s\S]*forum\.lead\.test/u);
  }, 180_000);

  it('investigate over a published package: the lead names the defining file and line', async () => {
    const out = await run('investigate', { objective: 'Where is a loose string coerced into a version?', background: ['Questions about the semver npm package'], deliverable: 'The file and lines that implement it' }, SEMVER);
    expect(out.state, JSON.stringify(out.error)).toBe('completed');
    const lead = out.text.slice(0, LEAD_CHARS);
    expect(lead).toContain('The most likely location is `functions/coerce.js`');
    expect(lead).toContain('`functions/coerce.js:7`');
    expect(out.text).not.toContain('## Unconfirmed citations');
  }, 180_000);
});
