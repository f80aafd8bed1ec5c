import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ToolResult } from '../../../../sandbox/tools/types.js';

export const FIXTURE_REPO = fileURLToPath(new URL('../../../fixtures/tools-repo', import.meta.url));

/** Create a temporary directory holding `files` (relative path → content). */
export async function makeTempRepo(files: Record<string, string | Uint8Array> = {}): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'fusion-tools-'));
  const repo = path.join(dir, 'repo');
  await mkdir(repo);
  for (const [rel, content] of Object.entries(files)) {
    const abs = path.join(repo, rel);
    await mkdir(path.dirname(abs), { recursive: true });
    await writeFile(abs, content);
  }
  return repo;
}

export async function removeTempRepo(repo: string): Promise<void> {
  await rm(path.dirname(repo), { recursive: true, force: true });
}

export function okText(result: ToolResult): string {
  if (!result.ok) throw new Error(`expected ok, got error: ${result.error}`);
  return result.text;
}

export function errorText(result: ToolResult): string {
  if (result.ok) throw new Error(`expected an error, got text: ${result.text.slice(0, 200)}`);
  return result.error;
}
