/**
 * The one redactor of credential-shaped text. Provider error text passes through it before it
 * reaches a child, a record, an error message or a log line (the broker, the model adapters and
 * every credential's own `redact`). It errs on the side of removing too much: an error message
 * that loses a word is harmless, a leaked key is not.
 *
 * Shapes: `Bearer <token>` (also masked echoes with `*`); `sk-…`/`pk-…`/`rk-…` keys (OpenAI
 * `sk-…` and `sk-proj-…`, Anthropic `sk-ant-…`) and Slack-style `xox?-…`, including masked echoes
 * like `sk-abc***xyz`; the daemon's own research keys `fsk_…`; and `name: value` / `name=value`
 * pairs whose name says key, token, secret, password or authorization (`x-api-key: …`,
 * `"api_key": "…"`, `access_token=…`).
 */
const BEARER = /(bearer\s+)[A-Za-z0-9._~+/=*-]{8,}/gi;
const PREFIXED_KEY = /\b(sk|pk|rk|xox[abp])-[A-Za-z0-9_*.-]{6,}/g;
const RESEARCH_KEY = /\bfsk_[A-Za-z0-9_*-]{6,}/g;
const NAMED_SECRET = /((?:api[_-]?key|x-api-key|authorization|access[_-]?token|secret|token|password)["']?\s*[:=]\s*["']?)[^\s"',;}&]+/gi;

export function redactSecrets(text: string): string {
  return text
    .replace(BEARER, '$1[redacted]')
    .replace(PREFIXED_KEY, '[redacted]')
    .replace(RESEARCH_KEY, '[redacted]')
    .replace(NAMED_SECRET, '$1[redacted]');
}
