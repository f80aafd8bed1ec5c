/** The PostgreSQL adapter's one rewrite of the store's SQL: `?` → `$n`, never inside quotes. */
import { describe, expect, it } from 'vitest';
import { redactDatabaseUrl, toPgPlaceholders } from '../../src/store/pg-db.js';

describe('toPgPlaceholders', () => {
  it('numbers placeholders in order and leaves quoted text alone', () => {
    expect(toPgPlaceholders("UPDATE t SET a = ?, b = '?' WHERE c = ? AND d = \"q?\" AND e IN (?, ?)")).toBe(
      "UPDATE t SET a = $1, b = '?' WHERE c = $2 AND d = \"q?\" AND e IN ($3, $4)",
    );
    expect(toPgPlaceholders('SELECT 1')).toBe('SELECT 1');
  });
});

describe('redactDatabaseUrl', () => {
  it('masks the password and keeps the rest', () => {
    expect(redactDatabaseUrl('postgres://fusion:s3cret@db.example:5432/fusion')).toBe('postgres://fusion:***@db.example:5432/fusion');
    expect(redactDatabaseUrl('postgres://fusion@127.0.0.1:5/x')).toBe('postgres://fusion@127.0.0.1:5/x');
    expect(redactDatabaseUrl('not a url')).toBe('postgres://(unparsable)');
  });
});
