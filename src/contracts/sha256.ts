/**
 * The one SHA-256 helper: lowercase hex of the digest; strings are hashed as UTF-8. Node builtins
 * only, so the sandbox child uses it too (its tool-call log and replay digests must equal the
 * supervisor's).
 */
import { createHash } from 'node:crypto';

export function sha256Hex(data: string | Uint8Array): string {
  const hash = createHash('sha256');
  if (typeof data === 'string') hash.update(data, 'utf8');
  else hash.update(data);
  return hash.digest('hex');
}
