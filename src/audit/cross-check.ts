/**
 * Cross-check of the child's sealed log against the broker's own record (docs/behaviour.md#d7).
 *
 * The broker is the child's only route to the network, so its record is the ground truth of
 * what was fetched. The child's log must tell the same story: the same fetches in the same
 * order, with the same requested URL, final URL, status, byte count and content hash, and the
 * tool result the child logged must be the extraction the broker returned. A fetch
 * the broker made that the log hides, or a log entry claiming content the broker never
 * delivered, fails the attempt.
 *
 * Model calls never appear in the child's log (the log records tool calls only); broker model
 * records are only schema-checked here.
 */
import { REJECTED_CALL_EVENT, RESEARCH_FETCH_TOOL } from '../contracts/constants.js';
import {
  brokerRecordSchema,
  type BrokerFetchRecord,
  type BrokerRecord,
  type ToolCallLogRecord,
} from '../contracts/broker-record.js';
import { FusionError } from '../errors.js';
import { sha256Hex } from '../contracts/sha256.js';

export interface CrossCheckOptions {
  /**
   * Accept child `fusion_web_fetch` error records with no broker counterpart (a call the child
   * refused locally, e.g. an undeclared URL, without asking the broker). Such a record cannot
   * hide network activity: nothing was fetched. Default false: every fetch attempt, accepted
   * or refused, must go through the broker and the counts must be equal.
   */
  allowChildOnlyRejections?: boolean;
}

export interface CrossCheckSummary {
  /** Fetch records in the child's log. */
  logFetches: number;
  /** Fetch records in the broker's record. */
  brokerFetches: number;
  /** Child error fetch records with no broker counterpart (only with allowChildOnlyRejections). */
  childOnlyRejections: number;
  brokerModelCalls: number;
}

function mismatch(what: string, details: Record<string, unknown> = {}): FusionError {
  return new FusionError('child_event_invalid', `tool-call log invalid: broker cross-check failed: ${what}`, { details });
}

/** Re-validates the broker records (they may come back from storage) and their ordering. */
function parseBrokerRecords(brokerRecords: readonly unknown[]): BrokerRecord[] {
  const parsed = brokerRecords.map((value, index) => {
    const result = brokerRecordSchema.safeParse(value);
    if (!result.success) {
      const issues = result.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`);
      throw mismatch(`broker record ${String(index)} is malformed: ${issues.join('; ')}`);
    }
    return result.data;
  });
  parsed.forEach((record, index) => {
    const previous = parsed[index - 1];
    if (previous !== undefined && record.ordinal <= previous.ordinal) {
      throw mismatch(`broker record ordinals are not strictly increasing at index ${String(index)}`);
    }
  });
  return parsed;
}

/** The hash the child must have logged for a refused fetch. */
function brokerRejectedHash(record: BrokerFetchRecord): string | undefined {
  if (record.rejected_url_sha256 !== undefined) return record.rejected_url_sha256;
  return record.url === undefined ? undefined : sha256Hex(record.url);
}

/** Whether the two records describe the same attempted fetch (before comparing details). */
function sameAttempt(log: ToolCallLogRecord, broker: BrokerFetchRecord): boolean {
  if (log.status === 'ok') return broker.ok && broker.url === log.url;
  return !broker.ok && brokerRejectedHash(broker) === log.rejected_url_sha256;
}

function compareOkFetch(index: number, log: ToolCallLogRecord, broker: BrokerFetchRecord): void {
  const label = `fetch ${String(index)} (log ordinal ${String(log.ordinal)})`;
  if (!broker.ok) throw mismatch(`${label}: the log says ok, the broker says error ${broker.error_code ?? ''}`.trimEnd());
  if (log.url !== broker.url) throw mismatch(`${label}: requested url differs`);
  if (log.final_url !== broker.final_url) throw mismatch(`${label}: final url differs`);
  if (log.http_status !== broker.http_status) throw mismatch(`${label}: http status differs`);
  if (log.content_sha256 !== broker.content_sha256) throw mismatch(`${label}: content hash differs`);
  if (log.response_bytes !== broker.response_bytes) throw mismatch(`${label}: response_bytes differs`);
  // The raw body's hash alone would let a child hand its model invented page text: the tool
  // result it logged (which crossCheckConversation binds to what the model was sent) must be the
  // extraction the broker returned.
  if (broker.result_sha256 !== undefined && log.result_sha256 !== broker.result_sha256) {
    throw mismatch(`${label}: the tool result differs from the extraction the broker returned (the model was not shown the fetched page)`);
  }
}

function compareErrorFetch(index: number, log: ToolCallLogRecord, broker: BrokerFetchRecord): void {
  const label = `fetch ${String(index)} (log ordinal ${String(log.ordinal)})`;
  if (broker.ok) throw mismatch(`${label}: the log says error, the broker says ok`);
  if (log.rejected_url_sha256 !== brokerRejectedHash(broker)) throw mismatch(`${label}: rejected URL hash differs`);
  if (log.http_status !== undefined && log.http_status !== broker.http_status) throw mismatch(`${label}: http status differs`);
}

/**
 * Throws `child_event_invalid` ("tool-call log invalid: broker cross-check failed: <what>")
 * unless the child's log and the broker's record agree on every fetch.
 */
export function crossCheckBrokerRecord(
  logRecords: readonly ToolCallLogRecord[],
  brokerRecords: readonly BrokerRecord[] | readonly unknown[],
  options: CrossCheckOptions = {},
): CrossCheckSummary {
  const broker = parseBrokerRecords(brokerRecords);
  const brokerFetches = broker.filter((record): record is BrokerFetchRecord => record.kind === 'fetch');
  const brokerModelCalls = broker.length - brokerFetches.length;
  const logFetches = logRecords.filter((record) => record.tool_name === RESEARCH_FETCH_TOOL);
  const allowChildOnly = options.allowChildOnlyRejections === true;

  if (!allowChildOnly && logFetches.length !== brokerFetches.length) {
    throw mismatch(`fetch count mismatch (log ${String(logFetches.length)}, broker ${String(brokerFetches.length)})`);
  }

  let next = 0;
  let childOnlyRejections = 0;
  logFetches.forEach((log, index) => {
    const candidate = brokerFetches[next];
    if (allowChildOnly && log.status === 'error' && (candidate === undefined || !sameAttempt(log, candidate))) {
      childOnlyRejections += 1;
      return;
    }
    if (candidate === undefined) throw mismatch(`fetch ${String(index)} (log ordinal ${String(log.ordinal)}) has no broker record`);
    if (log.status === 'ok') compareOkFetch(index, log, candidate);
    else compareErrorFetch(index, log, candidate);
    next += 1;
  });
  if (next !== brokerFetches.length) {
    throw mismatch(`the broker performed ${String(brokerFetches.length - next)} fetch(es) the log does not show`);
  }
  return { logFetches: logFetches.length, brokerFetches: brokerFetches.length, childOnlyRejections, brokerModelCalls };
}

/**
 * Binds the child's tool-call log to the model conversation the broker carried (beyond fetches):
 * every logged call must be, in order, a call the model actually asked for (same tool name and
 * argument digest), and every tool result the child sent back to the model must be the result
 * the log records for that call. A child cannot invent, reorder or hide a call, nor log a result
 * other than the one the model saw. (The log may end before the model's last requests: a child
 * stopped by a limit never ran them.)
 */
export function crossCheckConversation(logRecords: readonly ToolCallLogRecord[], brokerRecords: readonly BrokerRecord[]): void {
  const models = brokerRecords.filter((r): r is Extract<BrokerRecord, { kind: 'model' }> => r.kind === 'model' && r.ok);
  const requested = models.flatMap((m) => m.requested_calls ?? []);
  const sent = models.flatMap((m) => m.sent_results ?? []);
  if (logRecords.length > requested.length) {
    throw mismatch(`the log has ${logRecords.length} tool calls but the model asked for ${requested.length}`);
  }
  logRecords.forEach((rec, i) => {
    const want = requested[i]!;
    // A rejected call keeps the model's arguments but not its (possibly invented) tool name.
    const sameName = rec.tool_name === want.name || rec.tool_name === REJECTED_CALL_EVENT;
    if (!sameName || rec.arguments_sha256 !== want.arguments_sha256) {
      throw mismatch(`tool call ${i} is not the call the model asked for`, { ordinal: i, logged: rec.tool_name, requested: want.name });
    }
  });
  if (sent.length > logRecords.length) throw mismatch(`the child sent ${sent.length} tool results but logged ${logRecords.length} calls`);
  sent.forEach((digest, i) => {
    if (logRecords[i]!.result_sha256 !== digest) throw mismatch(`tool result ${i} sent to the model differs from the logged result`, { ordinal: i });
  });
}

/** The answer a stage wrote must be text a model response actually contained. */
export function checkAnswerProvenance(answer: string, brokerRecords: readonly BrokerRecord[]): void {
  const digest = sha256Hex(answer);
  const produced = brokerRecords.some((r) => r.kind === 'model' && r.ok && r.content_sha256 === digest);
  if (!produced) throw mismatch('the answer is not the content of any model response');
}
