/**
 * The scratch layout the agent-loop suites run in: a temp root holding the fixture repository
 * (`repo`) and the attempt's empty output directory (`out`).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, tempDir } from '../../integration/broker/fixtures.js';

export interface AgentWorkspace {
  root: string;
  repo: string;
  out: string;
  cleanup: () => void;
}

export function agentWorkspace(prefix: string): AgentWorkspace {
  const { dir: root, cleanup } = tempDir(prefix);
  const repo = join(root, 'repo');
  const out = join(root, 'out');
  mkdirSync(repo);
  mkdirSync(out);
  makeRepo(repo);
  return { root, repo, out, cleanup };
}
