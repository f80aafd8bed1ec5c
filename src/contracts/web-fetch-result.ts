/**
 * The text a `fusion_web_fetch` call hands the model: one function for the child that builds it
 * and the broker that records its digest, so the audit can require that the tool result the
 * child logged (and sent to the model) is exactly the extraction the broker returned, not page
 * text the child invented (docs/security.md#audit).
 */
import type { FetchResult } from './broker-protocol.js';

export function webFetchResultText(result: FetchResult): string {
  return JSON.stringify(
    {
      url: result.url,
      final_url: result.final_url,
      status: result.status,
      content_type: result.content_type,
      format: result.format,
      truncated: result.truncated,
      content: result.content,
    },
    null,
    2,
  );
}
