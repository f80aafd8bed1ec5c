import { describe, expect, it } from 'vitest';
import { crossCheckBrokerRecord } from '../../../src/audit/cross-check.js';
import {
  brokerFetchRecordSchema,
  brokerRecordSchema,
  type BrokerFetchRecord,
  type BrokerModelRecord,
  type BrokerRecord,
  type ToolCallLogRecord,
} from '../../../src/contracts/broker-record.js';
import { FusionError } from '../../../src/errors.js';
import { DECLARED, okFetch, record, rejectedFetch, sha256 } from './log-fixtures.js';

const AT = '2025-01-01T00:00:00.000Z';
const OTHER = 'https://example.org/b';

function model(ordinal: number): BrokerModelRecord {
  return { kind: 'model', ordinal, at: AT, durationMs: 5, requestBytes: 100, responseBytes: 50, toolCallsRequested: 1, ok: true };
}

function fetched(ordinal: number, overrides: Partial<BrokerFetchRecord> = {}): BrokerFetchRecord {
  return {
    kind: 'fetch',
    ordinal,
    at: AT,
    url: DECLARED,
    ok: true,
    final_url: 'https://example.com/a/',
    http_status: 200,
    content_sha256: sha256('page'),
    response_bytes: 1234,
    ...overrides,
  };
}

function refused(ordinal: number, url: string, overrides: Partial<BrokerFetchRecord> = {}): BrokerFetchRecord {
  return { kind: 'fetch', ordinal, at: AT, url, ok: false, error_code: 'blocked_address', ...overrides };
}

const asLog = (lines: Record<string, unknown>[]): ToolCallLogRecord[] => lines as unknown as ToolCallLogRecord[];

function expectMismatch(what: string, log: ToolCallLogRecord[], broker: readonly BrokerRecord[] | readonly unknown[], allowChildOnlyRejections = false): void {
  let error: unknown;
  try {
    crossCheckBrokerRecord(log, broker, { allowChildOnlyRejections });
  } catch (err) {
    error = err;
  }
  expect(error).toBeInstanceOf(FusionError);
  expect((error as FusionError).code).toBe('child_event_invalid');
  expect((error as FusionError).message).toContain('tool-call log invalid: broker cross-check failed: ');
  expect((error as FusionError).message).toContain(what);
}

const goodLog = asLog([record(0), okFetch(1), rejectedFetch(2, DECLARED), record(3, { tool_name: 'grep' })]);
const goodBroker: BrokerRecord[] = [model(0), fetched(1), model(2), refused(3, DECLARED), model(4)];

describe('crossCheckBrokerRecord', () => {
  it('accepts agreeing records and ignores model calls beyond their schema', () => {
    expect(crossCheckBrokerRecord(goodLog, goodBroker)).toEqual({
      logFetches: 2,
      brokerFetches: 2,
      childOnlyRejections: 0,
      brokerModelCalls: 3,
    });
  });

  it('accepts no fetches on either side', () => {
    expect(crossCheckBrokerRecord(asLog([record(0)]), [model(0)]).logFetches).toBe(0);
  });

  it('a broker refusal recorded only by hash matches the child rejection', () => {
    const broker = [refused(0, DECLARED, { url: undefined, rejected_url_sha256: sha256('http://undeclared.example/') })];
    expect(crossCheckBrokerRecord(asLog([rejectedFetch(0, 'http://undeclared.example/')]), broker).brokerFetches).toBe(1);
  });

  it('fetch count mismatch: a fetch hidden from the log', () => {
    expectMismatch('fetch count mismatch (log 1, broker 2)', asLog([okFetch(0)]), [fetched(0), fetched(1)]);
  });

  it('fetch count mismatch: a fetch the broker never made', () => {
    expectMismatch('fetch count mismatch (log 2, broker 1)', asLog([okFetch(0), okFetch(1)]), [fetched(0)]);
  });

  it('requested urls in a different order', () => {
    const log = asLog([okFetch(0), okFetch(1, { url: OTHER })]);
    expectMismatch('fetch 0 (log ordinal 0): requested url differs', log, [fetched(0, { url: OTHER }), fetched(1)]);
  });

  it('final url differs', () => {
    expectMismatch('final url differs', asLog([okFetch(0)]), [fetched(0, { final_url: 'https://example.com/elsewhere' })]);
  });

  it('content hash differs', () => {
    expectMismatch('content hash differs', asLog([okFetch(0)]), [fetched(0, { content_sha256: sha256('other page') })]);
  });

  it('response_bytes differs', () => {
    expectMismatch('response_bytes differs', asLog([okFetch(0)]), [fetched(0, { response_bytes: 1 })]);
  });

  it('http status differs', () => {
    expectMismatch('http status differs', asLog([okFetch(0)]), [fetched(0, { http_status: 203 })]);
    expectMismatch('http status differs', asLog([rejectedFetch(0, DECLARED, { http_status: 404 })]), [refused(0, DECLARED, { error_code: 'http_error', http_status: 500 })]);
  });

  it('ok/error disagreement both ways', () => {
    expectMismatch('the log says ok, the broker says error blocked_address', asLog([okFetch(0)]), [refused(0, DECLARED)]);
    expectMismatch('the log says error, the broker says ok', asLog([rejectedFetch(0, DECLARED)]), [fetched(0)]);
  });

  it('rejected URL hash differs', () => {
    expectMismatch('rejected URL hash differs', asLog([rejectedFetch(0, 'http://a.example/')]), [refused(0, DECLARED)]);
  });

  it('malformed or misordered broker records', () => {
    expectMismatch('broker record 0 is malformed', goodLog, [{ kind: 'fetch', ordinal: 0, at: AT, ok: true }]);
    expectMismatch('broker record 0 is malformed', goodLog, [{ ...model(0), extra: 1 }]);
    expectMismatch('not strictly increasing', goodLog, [model(1), fetched(1), refused(2, DECLARED)]);
  });

  describe('allowChildOnlyRejections', () => {
    const log = asLog([rejectedFetch(0, 'http://undeclared.example/'), okFetch(1), rejectedFetch(2, 'x')]);

    it('skips child-only rejections but still matches every broker fetch', () => {
      expect(crossCheckBrokerRecord(log, [fetched(0)], { allowChildOnlyRejections: true })).toMatchObject({
        logFetches: 3,
        brokerFetches: 1,
        childOnlyRejections: 2,
      });
      expectMismatch('fetch count mismatch', log, [fetched(0)], false);
    });

    it('a broker fetch hidden from the log still fails', () => {
      expectMismatch('the broker performed 1 fetch(es) the log does not show', log, [fetched(0), fetched(1, { url: OTHER })], true);
    });

    it('a log success the broker never saw still fails', () => {
      expectMismatch('has no broker record', asLog([okFetch(0)]), [], true);
    });
  });
});

describe('broker record schema', () => {
  it('accepts model and fetch records', () => {
    for (const value of goodBroker) expect(brokerRecordSchema.safeParse(value).success).toBe(true);
  });

  it('requires provenance on success and an error code on failure', () => {
    const noHash: Record<string, unknown> = { ...fetched(0) };
    delete noHash['content_sha256'];
    expect(brokerFetchRecordSchema.safeParse(noHash).success).toBe(false);
    expect(brokerFetchRecordSchema.safeParse({ ...refused(0, DECLARED), error_code: undefined }).success).toBe(false);
    expect(brokerFetchRecordSchema.safeParse({ ...refused(0, DECLARED), final_url: DECLARED }).success).toBe(false);
    expect(brokerFetchRecordSchema.safeParse({ ...refused(0, DECLARED), url: undefined }).success).toBe(false);
  });

  it('is closed and typed', () => {
    expect(brokerRecordSchema.safeParse({ ...model(0), provider: 'x' }).success).toBe(false);
    expect(brokerRecordSchema.safeParse({ ...model(0), ordinal: -1 }).success).toBe(false);
    expect(brokerRecordSchema.safeParse({ ...model(0), at: 'yesterday' }).success).toBe(false);
    expect(brokerRecordSchema.safeParse({ ...fetched(0), content_sha256: 'ABC' }).success).toBe(false);
  });
});
