/**
 * Stable run ids: `research_` + the first 32 hex characters of sha256(workspaceId + NUL + key).
 * The same workspace and Idempotency-Key always name the same run, in every daemon.
 */
import { sha256Hex } from '../contracts/canonical.js';

export function researchRunId(workspaceId: string, idempotencyKey: string): string {
  return `research_${sha256Hex(`${workspaceId}\0${idempotencyKey}`).slice(0, 32)}`;
}

export function researchDocumentId(runId: string): string {
  return `research_document_${runId}`;
}
