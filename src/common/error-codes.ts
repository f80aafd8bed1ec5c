/**
 * The error-code registry: every code any part of the project reports, the daemon's and the
 * sandbox child's alike, with its HTTP status, retryability and meaning. `src/errors.ts` builds
 * the one error class on it; the child (sandbox/, which imports only src/contracts and
 * src/common) types its own codes against it, so a code cannot exist outside the registry.
 *
 * Codes are part of the public contract (socket API, CLI exit paths, README table). A test keeps
 * the README's error-code table and this registry equal, so add a row there when you add one here.
 * Pure data, no imports: it sits below src/errors.ts in the layer order (docs/architecture.md#layers).
 */

export interface ErrorCodeInfo {
  /** HTTP status used when this error crosses the socket or TCP API. */
  readonly httpStatus: number;
  /** Whether retrying the same request later can succeed without changing it. */
  readonly retryable: boolean;
  /** One-line meaning, mirrored in the README table. */
  readonly meaning: string;
}

export const ERROR_CODES = {
  invalid_input: { httpStatus: 400, retryable: false, meaning: 'A request, argument or file failed validation; the message names the field.' },
  invalid_config: { httpStatus: 500, retryable: false, meaning: 'Configuration is invalid; fatal at start-up.' },
  not_found: { httpStatus: 404, retryable: false, meaning: 'No task, run or route with that id.' },
  method_not_allowed: { httpStatus: 405, retryable: false, meaning: 'The route exists but not for this HTTP method.' },
  payload_too_large: { httpStatus: 413, retryable: false, meaning: 'Request body over the API limit.' },
  unauthorized: { httpStatus: 401, retryable: false, meaning: 'Missing or invalid bearer API key.' },
  forbidden: { httpStatus: 403, retryable: false, meaning: 'Not allowed here: a personal or copilot key; a non-root socket caller on metrics or maintenance; a user outside the --socket-group opening the socket.' },
  dispatch_failed: { httpStatus: 503, retryable: false, meaning: 'A research run could not be handed to its queue; the run is marked failed.' },
  conflict: { httpStatus: 409, retryable: false, meaning: 'Idempotency key reused with a different payload, or a state conflict.' },
  invalid_transition: { httpStatus: 409, retryable: false, meaning: 'A state change the task state machine does not allow.' },
  task_not_terminal: { httpStatus: 409, retryable: true, meaning: 'The task has not reached a terminal state yet.' },
  inline_limit_exceeded: { httpStatus: 422, retryable: false, meaning: 'delivery:"inline" asked for an answer above the 49152-byte inline limit; nothing was truncated.' },
  artifact_error: { httpStatus: 500, retryable: false, meaning: 'A committed result failed verification (digest mismatch, missing file).' },
  prompt_budget_exceeded_forecast: { httpStatus: 422, retryable: false, meaning: 'Preflight forecast exceeds the prompt budget; no child was started.' },
  prompt_budget_exceeded_measured: { httpStatus: 422, retryable: false, meaning: 'The exact prompt of a stage exceeds the budget; checked before launch.' },
  child_event_invalid: { httpStatus: 500, retryable: false, meaning: 'A child\'s sealed tool-call log or seal failed verification.' },
  replay_inconclusive: { httpStatus: 500, retryable: true, meaning: 'A replayed tool call\'s result depended on a time limit (a slow regex or search on a loaded host), so the replay could neither confirm nor refute it; the attempt\'s answer is not used and the candidate is retried once. A task fails with it when the retry was inconclusive too. Retry the task.' },
  child_output_cap: { httpStatus: 500, retryable: false, meaning: 'A stage\'s output exceeded its byte cap (its answer, or /out over its file or byte cap at any depth); the output is preserved, never truncated.' },
  child_failed: { httpStatus: 500, retryable: false, meaning: 'A child exited abnormally, crashed or produced no answer.' },
  child_timeout: { httpStatus: 500, retryable: false, meaning: 'A child hit its wall or idle timeout and was killed.' },
  child_limit_exceeded: { httpStatus: 500, retryable: false, meaning: 'A child exceeded a request, tool-call or byte limit.' },
  launch_failed: { httpStatus: 500, retryable: true, meaning: 'A sandbox could not be created (retried once if transient).' },
  sandbox_unavailable: { httpStatus: 503, retryable: false, meaning: 'No sandbox backend is usable; the message gives the reason of each backend and its fix (install, start, join the docker group, build the image, or the rlimit mode).' },
  evaluation_invalid: { httpStatus: 500, retryable: false, meaning: 'The evaluator output failed the schema after its one repair.' },
  merge_invalid: { httpStatus: 500, retryable: false, meaning: 'The merger output is empty or mentions fusion internals.' },
  model_error: { httpStatus: 502, retryable: true, meaning: 'A model provider failed (after retries).' },
  bundle_changed: { httpStatus: 500, retryable: false, meaning: 'The task\'s repository bundle failed verification before use (its bytes no longer match the digest recorded at submission, or the archive is unsafe); nothing ran.' },
  repo_snapshot_missing: { httpStatus: 500, retryable: false, meaning: 'The repository snapshot a resumed task started over is gone from the daemon\'s data directory; the task was not run over the repository as it is now. Submit it again.' },
  supervisor_restarted: { httpStatus: 500, retryable: false, meaning: 'The daemon restarted while the task ran and it could not resume.' },
  cancelled: { httpStatus: 409, retryable: false, meaning: 'The task was cancelled.' },
  daemon_unavailable: { httpStatus: 503, retryable: true, meaning: 'No daemon answers on the socket.' },
  shutting_down: { httpStatus: 503, retryable: true, meaning: 'The daemon is shutting down and accepts no new work.' },
  store_error: { httpStatus: 500, retryable: true, meaning: 'The SQLite store failed.' },
  internal_error: { httpStatus: 500, retryable: false, meaning: 'An unexpected bug; the log has the details.' },
  // The socket API's strict HTTP (docs/security.md): Node-level refusals in the same envelope.
  unsupported_media_type: { httpStatus: 415, retryable: false, meaning: 'A request body without `Content-Type: application/json` (UTF-8).' },
  bad_request: { httpStatus: 400, retryable: false, meaning: 'Malformed HTTP (request line, header or framing); the connection is closed.' },
  headers_too_large: { httpStatus: 431, retryable: false, meaning: 'Request line and headers over the 16 KiB limit.' },
  uri_too_long: { httpStatus: 414, retryable: false, meaning: 'Request URL over the 8 KiB limit.' },
  client_timeout: { httpStatus: 408, retryable: true, meaning: 'The client did not send its request (headers or body) in time.' },
  // Pressure: refusals a caller retries later, with Retry-After.
  busy: { httpStatus: 429, retryable: true, meaning: 'Too many tasks are waiting (for the daemon or this caller); retry after Retry-After seconds.' },
  rate_limited: { httpStatus: 429, retryable: true, meaning: 'Too many failed API-key attempts from this address on the TCP listener; every research request from it is refused until Retry-After seconds pass.' },
  storage_full: { httpStatus: 507, retryable: true, meaning: 'The disk is full or below the free-space reserve; no task was accepted. Free space and retry.' },
  // Web search (docs/behaviour.md#g14): the configured provider's refusals and failures.
  search_unavailable: { httpStatus: 503, retryable: false, meaning: 'web_search / fusion search without a configured provider (FUSION_SEARCH_PROVIDER unset).' },
  search_quota_exceeded: { httpStatus: 429, retryable: true, meaning: 'The search provider refused the query for quota or rate limit (HTTP 429); retry later.' },
  search_auth_failed: { httpStatus: 502, retryable: false, meaning: 'The search provider refused the configured key (HTTP 401/403); check FUSION_SEARCH_API_KEY.' },
  search_failed: { httpStatus: 502, retryable: false, meaning: 'The search provider answered an error status, a redirect, non-JSON or malformed JSON (details name which).' },
  // Egress (docs/behaviour.md#e3): the twelve typed fetch failures.
  invalid_url: { httpStatus: 400, retryable: false, meaning: 'Fetch URL could not be parsed, has credentials or no host.' },
  unsupported_scheme: { httpStatus: 400, retryable: false, meaning: 'Fetch URL is not http(s).' },
  blocked_address: { httpStatus: 403, retryable: false, meaning: 'The host is localhost/metadata or resolves to a non-public address.' },
  dns_failure: { httpStatus: 502, retryable: true, meaning: 'DNS lookup failed.' },
  redirect_limit: { httpStatus: 502, retryable: false, meaning: 'More than 5 redirects.' },
  redirect_blocked: { httpStatus: 403, retryable: false, meaning: 'A redirect pointed to an unparsable or blocked location.' },
  response_too_large: { httpStatus: 502, retryable: false, meaning: 'Response over the 4 MiB cap.' },
  unsupported_content_type: { httpStatus: 415, retryable: false, meaning: 'Media type is not HTML, XHTML, plain text or Markdown.' },
  request_timeout: { httpStatus: 504, retryable: true, meaning: 'The single 90 s fetch deadline passed.' },
  network_error: { httpStatus: 502, retryable: true, meaning: 'Connection or protocol failure (including malformed Content-Length).' },
  extraction_failed: { httpStatus: 502, retryable: false, meaning: 'The body could not be decoded or converted.' },
  http_error: { httpStatus: 502, retryable: false, meaning: 'The origin answered a non-2xx status (kept in details).' },
  // The broker socket between a child (or stage worker) and the supervisor (docs/security.md#broker):
  // what the child's broker client reports itself, and the broker's fetch refusals.
  broker_unavailable: { httpStatus: 502, retryable: true, meaning: 'A child could not reach its broker socket, or the connection failed mid-request.' },
  broker_timeout: { httpStatus: 504, retryable: true, meaning: 'A child\'s broker request got no answer within its deadline.' },
  broker_protocol_error: { httpStatus: 502, retryable: false, meaning: 'The broker answered a child with a body that breaks the broker protocol.' },
  url_not_declared: { httpStatus: 403, retryable: false, meaning: 'A child asked the broker to fetch a URL the task did not declare; refused and recorded by its hash only.' },
  fetch_unavailable: { httpStatus: 403, retryable: false, meaning: 'A fetch asked of a broker that has no fetcher (not a research candidate): recorded under this code in the broker record, answered `forbidden`.' },
} as const satisfies Record<string, ErrorCodeInfo>;

export type ErrorCode = keyof typeof ERROR_CODES;
