import { describe, expect, it } from 'vitest';
import { RheoError } from '../../src/core/errors.js';
import { comparePositions, decodeQueryCursor, encodeQueryCursor } from '../../src/core/query-cursor.js';

describe('query cursor', () => {
  it('round-trips a position', () => {
    for (const position of [
      { timestampMs: 0, partition: 0, sequence: 1 },
      { timestampMs: Date.UTC(2026, 0, 1), partition: 7, sequence: 123_456 },
      { timestampMs: -1000, partition: 4095, sequence: Number.MAX_SAFE_INTEGER },
    ]) {
      expect(decodeQueryCursor('s', encodeQueryCursor(position))).toEqual(position);
    }
  });

  it('is URL-safe', () => {
    const cursor = encodeQueryCursor({ timestampMs: Date.UTC(2026, 0, 1), partition: 3, sequence: 99 });
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
  });

  const malformed: Array<[string, string]> = [
    ['not base64 JSON', '%%%'],
    ['empty JSON object', Buffer.from('{}').toString('base64url')],
    ['two numbers', Buffer.from('[1,2]').toString('base64url')],
    ['four numbers', Buffer.from('[1,2,3,4]').toString('base64url')],
    ['a string member', Buffer.from('[1,"2",3]').toString('base64url')],
    ['a fraction', Buffer.from('[1,2.5,3]').toString('base64url')],
    ['a negative partition', Buffer.from('[1,-1,3]').toString('base64url')],
    ['sequence 0', Buffer.from('[1,0,0]').toString('base64url')],
    ['an unsafe integer', Buffer.from('[1e300,0,1]').toString('base64url')],
  ];

  for (const [what, cursor] of malformed) {
    it(`rejects ${what} with invalid_argument naming the stream`, () => {
      try {
        decodeQueryCursor('orders', cursor);
        expect.unreachable();
      } catch (error) {
        expect(error).toBeInstanceOf(RheoError);
        expect((error as RheoError).code).toBe('invalid_argument');
        expect((error as RheoError).message).toContain('"orders"');
      }
    });
  }

  it('orders positions by (timestamp, partition, sequence)', () => {
    const a = { timestampMs: 1, partition: 2, sequence: 9 };
    const b = { timestampMs: 2, partition: 0, sequence: 1 };
    const c = { timestampMs: 2, partition: 1, sequence: 1 };
    const d = { timestampMs: 2, partition: 1, sequence: 2 };
    expect([d, b, c, a].sort(comparePositions)).toEqual([a, b, c, d]);
    expect(comparePositions(c, { ...c })).toBe(0);
  });
});
